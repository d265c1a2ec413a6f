#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "jobengine/ssh_keys.h"

namespace muster::jobengine {
namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 512> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int rc = pclose(p);
  INFO(cmd << "\n" << out);
  REQUIRE(rc == 0);
  return out;
}

std::string writeKey(const std::string& text) {
  char path[] = "/tmp/muster-key-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  close(fd);
  chmod(path, 0600);
  return path;
}

TEST_CASE("a generated key is read by OpenSSH's ssh-keygen and matches its public key", "[ssh]") {
  auto key = generateEd25519Key("muster-test@default");
  REQUIRE(key.ok());
  CHECK(key->private_key.rfind("-----BEGIN OPENSSH PRIVATE KEY-----\n", 0) == 0);
  CHECK(key->public_key.rfind("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI", 0) == 0);
  std::string path = writeKey(key->private_key);
  std::string derived = run("ssh-keygen -y -f " + path);
  CHECK(derived == key->public_key + "\n");
  // The fingerprint tool agrees on type and comment.
  std::string fp = run("ssh-keygen -l -f " + path);
  CHECK(fp.find("muster-test@default (ED25519)") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("two generated keys differ", "[ssh]") {
  auto a = generateEd25519Key("a");
  auto b = generateEd25519Key("a");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->public_key != b->public_key);
  CHECK(a->private_key != b->private_key);
}

TEST_CASE("the RFC 8032 test key encodes to the public key OpenSSH derives", "[ssh]") {
  // RFC 8032 section 7.1, TEST 1.
  const unsigned char seed[32] = {0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60, 0xba, 0x84, 0x4a,
                                  0xf4, 0x92, 0xec, 0x2c, 0xc4, 0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32,
                                  0x69, 0x19, 0x70, 0x3b, 0xac, 0x03, 0x1c, 0xae, 0x7f, 0x60};
  const unsigned char pub[32] = {0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe,
                                 0xd3, 0xc9, 0x64, 0x07, 0x3a, 0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6,
                                 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a};
  SshKeyPair key = encodeEd25519Key(std::string_view(reinterpret_cast<const char*>(seed), 32),
                                    std::string_view(reinterpret_cast<const char*>(pub), 32),
                                    "rfc8032", 0x01020304);
  CHECK(key.public_key ==
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINdamAGCsQq31Uv+08lkBzoO4XLz2qYjJa8CGmj3B1Ea rfc8032");
  std::string path = writeKey(key.private_key);
  CHECK(run("ssh-keygen -y -f " + path) == key.public_key + "\n");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace muster::jobengine
