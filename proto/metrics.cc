#include "proto/metrics.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace muster::metrics {
namespace {

void atomicAdd(std::atomic<double>& a, double v) {
  double old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, old + v, std::memory_order_relaxed)) {
  }
}

std::string formatValue(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string escapeLabel(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string labelText(const std::vector<std::string>& names, const std::vector<std::string>& values,
                      const std::string& extra_name = "", const std::string& extra_value = "") {
  std::string out;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    out += out.empty() ? "" : ",";
    out += names[i] + "=\"" + escapeLabel(values[i]) + "\"";
  }
  if (!extra_name.empty()) {
    out += out.empty() ? "" : ",";
    out += extra_name + "=\"" + extra_value + "\"";
  }
  return out.empty() ? "" : "{" + out + "}";
}

template <class M>
void header(std::ostringstream& out, const Family<M>& f, const char* type) {
  out << "# HELP " << f.name() << ' ' << f.help() << "\n# TYPE " << f.name() << ' ' << type << '\n';
}

}  // namespace

void Counter::add(double v) { atomicAdd(value_, v); }
void Gauge::add(double v) { atomicAdd(value_, v); }

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size()]) {
  for (size_t i = 0; i < bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::observe(double v) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (v <= bounds_[i]) {
      buckets_[i].fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
  count_.fetch_add(1, std::memory_order_relaxed);
  atomicAdd(sum_, v);
}

uint64_t Histogram::cumulative(size_t i) const {
  uint64_t total = 0;
  for (size_t j = 0; j <= i && j < bounds_.size(); ++j) total += buckets_[j].load(std::memory_order_relaxed);
  return total;
}

std::vector<double> exponentialBuckets(double start, double factor, int count) {
  std::vector<double> out;
  for (int i = 0; i < count; ++i, start *= factor) out.push_back(start);
  return out;
}

template <class M>
M& Family<M>::with(const std::vector<std::string>& values) {
  absl::MutexLock lock(&mu_);
  auto it = children_.find(values);
  if (it != children_.end()) return *it->second;
  std::unique_ptr<M> m;
  if constexpr (std::is_same_v<M, Histogram>) m = std::make_unique<M>(bounds_);
  else m = std::make_unique<M>();
  M& ref = *m;
  children_.emplace(values, std::move(m));
  return ref;
}

template <class M>
std::vector<std::pair<std::vector<std::string>, const M*>> Family<M>::children() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<std::vector<std::string>, const M*>> out;
  for (const auto& [k, v] : children_) out.emplace_back(k, v.get());
  return out;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

Family<Counter>& Registry::counter(const std::string& name, const std::string& help,
                                   std::vector<std::string> labels) {
  absl::MutexLock lock(&mu_);
  for (auto& f : counters_) if (f->name() == name) return *f;
  counters_.push_back(std::make_unique<Family<Counter>>(name, help, std::move(labels)));
  return *counters_.back();
}

Family<Gauge>& Registry::gauge(const std::string& name, const std::string& help,
                               std::vector<std::string> labels) {
  absl::MutexLock lock(&mu_);
  for (auto& f : gauges_) if (f->name() == name) return *f;
  gauges_.push_back(std::make_unique<Family<Gauge>>(name, help, std::move(labels)));
  return *gauges_.back();
}

Family<Histogram>& Registry::histogram(const std::string& name, const std::string& help,
                                       std::vector<double> bounds, std::vector<std::string> labels) {
  absl::MutexLock lock(&mu_);
  for (auto& f : histograms_) if (f->name() == name) return *f;
  histograms_.push_back(
      std::make_unique<Family<Histogram>>(name, help, std::move(labels), std::move(bounds)));
  return *histograms_.back();
}

std::string Registry::render() const {
  absl::MutexLock lock(&mu_);
  std::ostringstream out;
  for (const auto& f : counters_) {
    header(out, *f, "counter");
    for (const auto& [labels, m] : f->children())
      out << f->name() << labelText(f->labelNames(), labels) << ' ' << formatValue(m->value()) << '\n';
  }
  for (const auto& f : gauges_) {
    header(out, *f, "gauge");
    for (const auto& [labels, m] : f->children())
      out << f->name() << labelText(f->labelNames(), labels) << ' ' << formatValue(m->value()) << '\n';
  }
  for (const auto& f : histograms_) {
    header(out, *f, "histogram");
    for (const auto& [labels, h] : f->children()) {
      for (size_t i = 0; i < h->bounds().size(); ++i) {
        out << f->name() << "_bucket"
            << labelText(f->labelNames(), labels, "le", formatValue(h->bounds()[i])) << ' '
            << h->cumulative(i) << '\n';
      }
      out << f->name() << "_bucket" << labelText(f->labelNames(), labels, "le", "+Inf") << ' '
          << h->count() << '\n';
      out << f->name() << "_sum" << labelText(f->labelNames(), labels) << ' ' << formatValue(h->sum())
          << '\n';
      out << f->name() << "_count" << labelText(f->labelNames(), labels) << ' ' << h->count() << '\n';
    }
  }
  return out.str();
}

Registry& defaultRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

Counter& apiWriteErrors(const std::string& kind) {
  static auto& family = defaultRegistry().counter(
      "muster_api_write_errors_total", "Event and status writes the API server refused.", {"kind"});
  return family.with({kind});
}

}  // namespace muster::metrics
