#include "jobengine/ssh_keys.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstdint>
#include <memory>

namespace muster::jobengine {
namespace {

constexpr std::string_view kKeyType = "ssh-ed25519";

void putU32(std::string* out, uint32_t v) {
  out->push_back(static_cast<char>(v >> 24));
  out->push_back(static_cast<char>(v >> 16));
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v));
}
void putString(std::string* out, std::string_view s) {
  putU32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

std::string base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string publicBlob(std::string_view public_key) {
  std::string blob;
  putString(&blob, kKeyType);
  putString(&blob, public_key);
  return blob;
}

std::string opensslError(std::string_view what) {
  unsigned long e = ERR_get_error();
  char buf[256] = {};
  if (e != 0) ERR_error_string_n(e, buf, sizeof buf);
  return std::string(what) + (e != 0 ? std::string(": ") + buf : std::string());
}

}  // namespace

SshKeyPair encodeEd25519Key(std::string_view seed, std::string_view public_key,
                            std::string_view comment, uint32_t check) {
  const std::string blob = publicBlob(public_key);

  // PROTOCOL.key: the private section, padded with 1, 2, 3, ... to the cipher block size (8 for
  // "none").
  std::string priv;
  putU32(&priv, check);
  putU32(&priv, check);
  putString(&priv, kKeyType);
  putString(&priv, public_key);
  std::string secret(seed);
  secret.append(public_key);  // OpenSSH stores the 64-byte "secret key" = seed || public key
  putString(&priv, secret);
  putString(&priv, comment);
  for (char pad = 1; priv.size() % 8 != 0; ++pad) priv.push_back(pad);

  std::string file("openssh-key-v1");
  file.push_back('\0');
  putString(&file, "none");  // cipher
  putString(&file, "none");  // kdf
  putString(&file, "");      // kdf options
  putU32(&file, 1);          // number of keys
  putString(&file, blob);
  putString(&file, priv);

  const std::string encoded = base64(file);
  SshKeyPair out;
  out.private_key = "-----BEGIN OPENSSH PRIVATE KEY-----\n";
  for (size_t i = 0; i < encoded.size(); i += 70) out.private_key += encoded.substr(i, 70) + "\n";
  out.private_key += "-----END OPENSSH PRIVATE KEY-----\n";
  out.public_key = std::string(kKeyType) + " " + base64(blob);
  if (!comment.empty()) out.public_key += " " + std::string(comment);
  return out;
}

absl::StatusOr<SshKeyPair> generateEd25519Key(std::string_view comment) {
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
      EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr), &EVP_PKEY_CTX_free);
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) <= 0)
    return absl::InternalError(opensslError("Ed25519 key generation unavailable"));
  EVP_PKEY* raw = nullptr;
  if (EVP_PKEY_keygen(ctx.get(), &raw) <= 0 || raw == nullptr)
    return absl::InternalError(opensslError("Ed25519 key generation failed"));
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(raw, &EVP_PKEY_free);

  unsigned char seed[32], pub[32];
  size_t seed_len = sizeof seed, pub_len = sizeof pub;
  if (EVP_PKEY_get_raw_private_key(key.get(), seed, &seed_len) <= 0 || seed_len != 32 ||
      EVP_PKEY_get_raw_public_key(key.get(), pub, &pub_len) <= 0 || pub_len != 32)
    return absl::InternalError(opensslError("reading the Ed25519 key failed"));
  uint32_t check = 0;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&check), sizeof check) != 1)
    return absl::InternalError(opensslError("no randomness"));
  SshKeyPair out = encodeEd25519Key(std::string_view(reinterpret_cast<char*>(seed), 32),
                                    std::string_view(reinterpret_cast<char*>(pub), 32), comment,
                                    check);
  OPENSSL_cleanse(seed, sizeof seed);
  return out;
}

}  // namespace muster::jobengine
