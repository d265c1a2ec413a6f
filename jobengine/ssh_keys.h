#pragma once

// SSH key material generated in-process with OpenSSL (Ed25519), written in the formats OpenSSH
// reads: the "openssh-key-v1" private key file (unencrypted) and one-line public keys as in
// authorized_keys / known_hosts.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace muster::jobengine {

struct SshKeyPair {
  std::string private_key;  // "-----BEGIN OPENSSH PRIVATE KEY-----\n...\n"
  std::string public_key;   // "ssh-ed25519 AAAA... <comment>" (no newline)
};

absl::StatusOr<SshKeyPair> generateEd25519Key(std::string_view comment);

// The openssh-key-v1 file and public key line for a given raw Ed25519 key pair (32-byte seed and
// 32-byte public key); `check` is the 32-bit check value OpenSSH writes twice. Exposed so tests
// can compare against known output.
SshKeyPair encodeEd25519Key(std::string_view seed, std::string_view public_key,
                            std::string_view comment, uint32_t check);

}  // namespace muster::jobengine
