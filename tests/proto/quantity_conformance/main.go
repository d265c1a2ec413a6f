// Command quantity-conformance prints what k8s.io/apimachinery's resource.ParseQuantity makes of a
// deterministic set of inputs, one JSON object per line, for tests/proto/quantity_conformance/
// compare.py to hold Muster's parser (proto/quantity.h) against.
//
//	quantity-conformance [-seed N] [-count N]
//
// The inputs are the hand-picked edge cases below, then -count distinct inputs drawn from a small
// grammar (signs, digits, decimal points, every suffix, exponents) with malformed variants (empty,
// spaces, doubled signs, unknown suffixes, stray bytes, huge exponents, very long digit strings,
// values near the int64 and int128 limits). The same seed gives the same inputs on every machine:
// the generator is a local splitmix64, not math/rand.
//
// Each line: {"in": hex of the input bytes, "src": "edge"|"gen", "ok": ParseQuantity succeeded,
// "err": "format"|"suffix"|"numeric" (which apimachinery error), and when ok: "string" (String()),
// "canonical" (CanonicalizeBytes, what String() prints when it does not echo the input),
// "mantissa"/"exponent" (AsCanonicalBytes), "format", "nano" (the exact amount in 10^-9 units:
// an integer, or beyond 60 digits "<integer without trailing zeros>e<n>" so that 1e2147483647
// stays small), "milli"
// (MilliValue()) and "value" (Value())}.
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Hand-picked inputs: Muster's unit-test inputs, the documented grammar's corners, the int64 and
// int32 boundaries, and the malformed inputs apimachinery's own tests use.
var edgeCases = []string{
	// zero, signs, leading zeros, missing parts
	"", "0", "-0", "+0", "00", "000", "0.0", ".0", "0.", "0e0", "0E-0", "0Ki", "-0Ki", "0n", "0Ei",
	"1", "-1", "+1", "007", "+007", "-007", "1.", "1.G", ".5", "-.5", "+.5", "0.5", "00.50",
	"Gi", ".", "+", "-", "+.", "-.", ".e-10", ".Ki", "-Gi", "e3", "m",
	// everyday quantities
	"100m", "1.5", "2Gi", "500Mi", "0.1Gi", "-0.1Gi", "1.5E-3", "100.035Ki", "1.5Gi", "0.5Ki",
	"1.3E+6", "7.123456M", "1.234k", "1234", "1000m", "1000M", "1024Mi", "2000Ki", "1023", "1024",
	"1025", "-1023", "-1024", "1023Ki", "1025Ki", "3Ki", "8Ki", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi",
	"1Ei", "5Ti", "4Pi", "3Ei", "1e3", "1E3", "1e-3", "0.5e-2", "1e-9", "1e-10", "1e0", "1e1",
	"1e2", "1e00003", "1E-003", "1e+0", "1e-0", "1k", "1M", "1G", "1T", "1P", "1E", "5n", "4u",
	"3m", "8k", "7M", "6G", "2P",
	// finer than nano: rounded up in magnitude
	"0.1n", "-0.1n", "-0.5n", "1.1E-9", "3.001n", "-3.001n", "0.0000000001", "0.00000012345",
	"0.000000000001Ki", ".000000000001Ki", "-0.000000000001Ki", "0.0001Ki", "-0.0001Ki", "1e-100",
	"-1e-100", "2147483647e-9", "1e-1000", "1e-10000",
	// ceilings, negative amounts
	"1001m", "-1.5", "-1500u", "-1n", "-1m", "-999m", "-1001m", "-2.5", "2.5", "-0.5",
	"1.0000000001", "-1.0000000001", "999.9999999999m",
	// int64 boundaries, in units, milli and nano
	"9223372036854775807", "9223372036854775808", "-9223372036854775807", "-9223372036854775808",
	"-9223372036854775809", "9223372036854775806", "922337203685477580", "922337203685477580.7",
	"922337203685477580.8", "9223372036854775.807", "9223372036854775.808", "9223372036854775807m",
	"9223372036854775808m", "-9223372036854775808m", "-9223372036854775809m", "9223372036854775807n",
	"-9223372036854775808n", "9223372036854775807u", "9223372036854775807k", "9223372036854775807Ki",
	"8796093022207Ki", "8796093022208Ki", "8589934591Mi", "8589934592Mi", "8388607Ti", "8388608Ti",
	"8191Pi", "8192Pi", "7Ei", "7.99Ei", "8Ei", "9Ei", "-8Ei", "-9Ei", "18446744073709551615",
	"18446744073709551616", "9.223372036854775807E", "9.223372036854775808E", "9223372036854775807e0",
	"9223372036854775807e-3", "999999999999999999", "1000000000000000000", "99999999999999999.9",
	// beyond int64: exact in Go, and past int128 nano units (about 1.7e29 units) in Muster
	"12E", "-12E", "999E", "1000E", "1000P", "1001E", "123456789E", "1e18", "1e19", "1e20", "1e21",
	"1e22", "1e24", "1.5e21", "10e20", "1e27", "1e28", "1e29", "1e30", "1e100", "-1e100", "1e1000",
	"-1e1000", "123456789012345678901234567890", "999999999999999999999999999999999999999999",
	"1000000000000000000000000000000000000000000e-30", "170141183460469231731687303715884105727n",
	"170141183460469231731687303715884105728n", "-170141183460469231731687303715884105727n",
	"-170141183460469231731687303715884105728n", "170141183460469231731.687303715884105727",
	"170141183460469231731.687303715884105728", "170141183460469231731687303715.884105727u",
	// exponents at and past the int32 and int64 limits (apimachinery reads them with ParseInt and
	// keeps the low 32 bits)
	"1e2147483647", "1.5e2147483647", "-1e2147483647", "1E+2147483647", "1e6442450943",
	"1e4294967296", "1e4294967297", "1e-2147483649", "1e-4294967296", "1e9223372036854775807",
	"1e9223372036854775808", "1e-9223372036854775808", "1e-9223372036854775809",
	"1e99999999999999999999", "1e10000", "1.5e-10000", "-1e9999",
	// malformed (many from apimachinery's quantity_test.go)
	"1.2.3", "1 Gi", "1KiB", "1e", "1E+", "1e+", "1e-", "--1", "++1", "+-1", "-+1", " 1", "1 ", "\t1",
	"1\n", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", "1K",
	"1k+3", "1Ki3", "1ee3", "1e3.5", "1k1", "1mi", "1KI", "1ki", "1Gb", "1kk", "1Kii", "1MiB",
	"0x10", "1_000", "1,5", "inf", "NaN", "-Inf", "1e3e3", "1e3k", "1ke3", "1Mi-1", "1m+",
	"\u0661", "\uff11", "1\u0661", "1\x00", "\x00", "\xff", "1\xff", "1Ki\x00", "\xef\xbb\xbf1",
}

type rng struct{ s uint64 }

// next is splitmix64.
func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *rng) intn(n int) int           { return int(r.next() % uint64(n)) }
func (r *rng) between(lo, hi int) int   { return lo + r.intn(hi-lo+1) }
func (r *rng) percent(p int) bool       { return r.intn(100) < p }
func (r *rng) pick(xs ...string) string { return xs[r.intn(len(xs))] }

func (r *rng) digits(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + r.intn(10))
	}
	return string(b)
}

// digitCount: mostly short, sometimes up to int64's 19 digits, rarely a little past it.
func (r *rng) digitCount() int {
	switch x := r.intn(100); {
	case x < 60:
		return r.between(1, 3)
	case x < 80:
		return r.between(4, 9)
	case x < 95:
		return r.between(10, 18)
	default:
		return r.between(19, 25)
	}
}

var limits = []string{
	"9223372036854775807", "9223372036854775808", "9223372036854775806", "922337203685477580",
	"18446744073709551615", "18446744073709551616", "2147483647", "2147483648", "4294967295",
	"4294967296", "170141183460469231731687303715884105727", "170141183460469231731",
	"170141183460469231732", "8796093022207", "8796093022208", "8589934591", "8589934592",
	"999999999999999999", "1000000000000000000", "100000000000000000000",
}

func (r *rng) number() string {
	lead := ""
	if r.percent(10) {
		lead = strings.Repeat("0", r.between(1, 3))
	}
	switch x := r.intn(100); {
	case x < 45:
		return lead + r.digits(r.digitCount())
	case x < 70:
		return lead + r.digits(r.digitCount()) + "." + r.digits(r.digitCount())
	case x < 76:
		return lead + r.digits(r.digitCount()) + "."
	case x < 85:
		return "." + r.digits(r.digitCount())
	case x < 94:
		l := r.pick(limits...)
		if r.percent(30) { // move the decimal point into the limit
			p := r.between(1, len(l)-1)
			l = l[:p] + "." + l[p:]
		}
		return l
	default: // very long digit strings
		n := r.between(26, 300)
		if r.percent(50) {
			p := r.between(0, n)
			return r.digits(p) + "." + r.digits(n-p)
		}
		return r.digits(n)
	}
}

var unknownSuffixes = []string{
	"K", "Kb", "KiB", "i", "mi", "Mb", "ki", "g", "Gi3", "ee3", "e", "E+", "e-", "k+3", "Ki3",
	"mm", "kM", "MiB", "b", "B", "x", "%", "nn", "uu", "Ti2", "EE", "ei", "eI", "Ei+1", "e3m",
}

var exponentLimits = []string{
	"2147483647", "2147483648", "4294967295", "4294967296", "4294967297", "6442450943",
	"9223372036854775807", "9223372036854775808", "99999999999999999999",
}

func (r *rng) exponent() string {
	var v string
	switch x := r.intn(100); {
	case x < 70:
		v = strconv.Itoa(r.between(0, 40))
	case x < 77:
		v = strings.Repeat("0", r.between(1, 3)) + strconv.Itoa(r.between(0, 40))
	case x < 87:
		v = strconv.Itoa(r.between(41, 400))
	case x < 92:
		v = strconv.Itoa(r.between(401, 10000))
	default:
		v = r.pick(exponentLimits...)
	}
	return r.pick("e", "E") + r.pick("", "", "+", "-", "-") + v
}

func (r *rng) suffix() string {
	switch x := r.intn(100); {
	case x < 20:
		return ""
	case x < 45:
		return r.pick("n", "u", "m", "k", "M", "G", "T", "P", "E")
	case x < 70:
		return r.pick("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
	case x < 95:
		return r.exponent()
	default:
		return r.pick(unknownSuffixes...)
	}
}

// Bytes a malformed input may gain: spaces, signs, points, suffix letters, NUL, a lone 0xff, a
// UTF-8 non-ASCII digit.
var oddBytes = []string{" ", "\t", "\n", "+", "-", ".", "e", "E", "i", "K", "k", "m", "0", "9",
	"\x00", "\xff", "\u0661", "_", ",", "x"}

func (r *rng) mutate(s string) string {
	switch r.intn(10) {
	case 0: // insert a byte
		p := r.between(0, len(s))
		return s[:p] + r.pick(oddBytes...) + s[p:]
	case 1: // delete a byte
		if len(s) == 0 {
			return s
		}
		p := r.intn(len(s))
		return s[:p] + s[p+1:]
	case 2: // replace a byte
		if len(s) == 0 {
			return r.pick(oddBytes...)
		}
		p := r.intn(len(s))
		return s[:p] + r.pick(oddBytes...) + s[p+1:]
	case 3: // double sign
		return r.pick("+", "-") + r.pick("+", "-") + strings.TrimLeft(s, "+-")
	case 4: // leading or trailing space
		if r.percent(50) {
			return " " + s
		}
		return s + " "
	case 5: // a second number part
		return s + r.pick(".", ".5", "1", "+1", "e3", "Ki")
	case 6: // only the suffix, or only the sign
		return strings.TrimLeft(s, "+-0123456789.")
	case 7: // truncated
		if len(s) == 0 {
			return s
		}
		return s[:r.intn(len(s))]
	case 8: // duplicated suffix
		t := strings.TrimLeft(s, "+-0123456789.")
		return s + t
	default: // empty
		return ""
	}
}

func (r *rng) candidate() string {
	s := r.pick("", "", "", "", "-", "-", "-", "+", "+") + r.number() + r.suffix()
	if r.percent(20) {
		s = r.mutate(s)
	}
	return s
}

// Inputs with the shape that reaches apimachinery's exponent suffix: its scanner's number part, then
// e/E and what strconv.ParseInt reads.
var exponentShape = regexp.MustCompile(`^[+-]?([0-9]*)(?:\.([0-9]*))?[eE]([+-]?[0-9]+)$`)

// maxSlowExponent bounds the exponents given to apimachinery's inf.Dec path: its cost grows faster
// than linearly in the exponent (about 40 ms at 10^4, 7 s at 10^5), and 1e-2147483647 does not
// finish. Muster parses those instantly, but there is no Go answer to compare with.
const maxSlowExponent = 10000

// tooSlowForApimachinery tells whether ParseQuantity, String or Value would run for seconds: an
// exponent (as apimachinery reads it: the low 32 bits of a 64-bit integer) past maxSlowExponent,
// unless ParseQuantity takes its int64 fast path with a non-zero mantissa.
func tooSlowForApimachinery(s string) bool {
	m := exponentShape.FindStringSubmatch(s)
	if m == nil {
		return false
	}
	parsed, err := strconv.ParseInt(m[3], 10, 64)
	if err != nil {
		return false // refused as a bad suffix
	}
	exponent := int64(int32(parsed))
	num := strings.TrimLeft(m[1], "0")
	denom := m[2]
	if num == "" {
		num = "0"
	}
	fast := 18-len(num)-len(denom) >= 0 && exponent-int64(len(denom)) >= -9
	zero := strings.Trim(num+denom, "0") == ""
	if fast && !zero {
		return false
	}
	return exponent > maxSlowExponent || exponent < -maxSlowExponent
}

type line struct {
	In        string  `json:"in"`
	Src       string  `json:"src"`
	OK        bool    `json:"ok"`
	Err       string  `json:"err,omitempty"`
	String    *string `json:"string,omitempty"`
	Canonical *string `json:"canonical,omitempty"`
	Mantissa  *string `json:"mantissa,omitempty"`
	Exponent  *int32  `json:"exponent,omitempty"`
	Format    *string `json:"format,omitempty"`
	Nano      *string `json:"nano,omitempty"`
	Milli     *int64  `json:"milli,omitempty"`
	Value     *int64  `json:"value,omitempty"`
}

func errorKind(err error) string {
	switch {
	case errors.Is(err, resource.ErrFormatWrong):
		return "format"
	case errors.Is(err, resource.ErrSuffix):
		return "suffix"
	case errors.Is(err, resource.ErrNumeric):
		return "numeric"
	}
	return "other: " + err.Error()
}

// nano is the exact amount in units of 10^-9 (ParseQuantity has rounded it to that scale).
func nano(q resource.Quantity) string {
	c := q.DeepCopy()
	d := c.AsDec()
	u := d.UnscaledBig()
	if u.Sign() == 0 {
		return "0"
	}
	shift := 9 - int64(d.Scale())
	if shift < 0 {
		panic(fmt.Sprintf("%v is finer than nano", d))
	}
	digits := u.String()
	if int64(len(strings.TrimPrefix(digits, "-")))+shift <= 60 {
		return digits + strings.Repeat("0", int(shift))
	}
	trimmed := strings.TrimRight(digits, "0")
	return trimmed + "e" + strconv.FormatInt(shift+int64(len(digits)-len(trimmed)), 10)
}

func evaluate(in, src string) line {
	l := line{In: hex.EncodeToString([]byte(in)), Src: src}
	q, err := resource.ParseQuantity(in)
	if err != nil {
		l.Err = errorKind(err)
		return l
	}
	l.OK = true
	str := q.String()
	number, suffix := q.CanonicalizeBytes(nil)
	canonical := string(number) + string(suffix)
	mantissa, exponent := q.AsCanonicalBytes(nil)
	m := string(mantissa)
	format := string(q.Format)
	n := nano(q)
	milli, value := q.MilliValue(), q.Value()
	l.String, l.Canonical, l.Mantissa, l.Exponent = &str, &canonical, &m, &exponent
	l.Format, l.Nano, l.Milli, l.Value = &format, &n, &milli, &value
	return l
}

func apimachineryVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/apimachinery" {
				return dep.Version
			}
		}
	}
	return "(unknown version)"
}

func main() {
	seed := flag.Uint64("seed", 1, "seed of the generated inputs")
	count := flag.Int("count", 6000, "number of generated inputs (distinct, besides the edge cases)")
	flag.Parse()

	seen := map[string]bool{}
	var inputs, sources []string
	for _, s := range edgeCases {
		if seen[s] {
			fmt.Fprintf(os.Stderr, "quantity-conformance: edge case %q listed twice\n", s)
			os.Exit(2)
		}
		if tooSlowForApimachinery(s) {
			fmt.Fprintf(os.Stderr, "quantity-conformance: edge case %q is too slow for apimachinery\n", s)
			os.Exit(2)
		}
		seen[s] = true
		inputs, sources = append(inputs, s), append(sources, "edge")
	}
	r := &rng{s: *seed}
	slow := 0
	for generated := 0; generated < *count; {
		s := r.candidate()
		if seen[s] {
			continue
		}
		seen[s] = true
		if tooSlowForApimachinery(s) {
			slow++
			continue
		}
		inputs, sources = append(inputs, s), append(sources, "gen")
		generated++
	}

	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for i, s := range inputs {
		if err := enc.Encode(evaluate(s, sources[i])); err != nil {
			fmt.Fprintln(os.Stderr, "quantity-conformance:", err)
			os.Exit(1)
		}
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "quantity-conformance:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "quantity-conformance: k8s.io/apimachinery %s: %d edge cases and %d "+
		"generated inputs (seed %d); %d generated inputs left out as too slow for apimachinery\n",
		apimachineryVersion(), len(edgeCases), *count, *seed, slow)
}
