// Authentication and server verification: TLS set up from the kubeconfig (the CA or the system's,
// client certificates), the server's name checked on every connection, bearer tokens re-read
// from their file as kubelet-projected tokens rotate.
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "proto/client/internal.h"
#include "proto/strings.h"

namespace muster::proto::client_internal {

namespace {

bool parsesAsPrivateKey(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return false;
  auto no_password = [](char*, int, int, void*) { return 0; };
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, no_password, nullptr);
  const bool ok = key != nullptr;
  EVP_PKEY_free(key);
  BIO_free(bio);
  ERR_clear_error();
  return ok;
}

}  // namespace

std::string opensslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

absl::Status configureTls(ssl::context& tls, const RestConfig& config, const ServerUrl& url,
                          std::string* verify_name, bool* verify_ip) {
  boost::system::error_code ec;
  tls.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                      ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                  ec);
  if (config.insecure_skip_tls_verify) {
    tls.set_verify_mode(ssl::verify_none, ec);
  } else {
    tls.set_verify_mode(ssl::verify_peer, ec);
    if (!config.ca_pem.empty()) {
      tls.add_certificate_authority(asio::buffer(config.ca_pem), ec);
      if (ec) return absl::InvalidArgumentError("the CA certificate is not valid PEM");
    } else {
      tls.set_default_verify_paths(ec);
      if (ec) {
        return absl::InternalError(strCat("cannot load the system CA certificates: ", ec.message()));
      }
    }
  }
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    return absl::InvalidArgumentError("a client certificate needs both a certificate and a key");
  }
  if (!config.client_cert_pem.empty()) {
    tls.use_certificate_chain(asio::buffer(config.client_cert_pem), ec);
    if (ec) return absl::InvalidArgumentError("the client certificate is not valid PEM");
    // Encrypted keys are not supported: never let OpenSSL prompt on a terminal.
    tls.set_password_callback(
        [](std::size_t, ssl::context::password_purpose) { return std::string(); }, ec);
    if (!parsesAsPrivateKey(config.client_key_pem)) {
      return absl::InvalidArgumentError("the client key is not a valid PEM private key");
    }
    tls.use_private_key(asio::buffer(config.client_key_pem), ssl::context::pem, ec);
    if (ec || SSL_CTX_check_private_key(tls.native_handle()) != 1) {
      ERR_clear_error();
      return absl::InvalidArgumentError("the client key does not match the client certificate");
    }
  }
  *verify_name = config.tls_server_name.empty() ? url.host : config.tls_server_name;
  *verify_ip = isIpAddress(*verify_name);
  return absl::OkStatus();
}

bool prepareVerification(SSL* native, const RestConfig& config, const std::string& verify_name,
                         bool verify_ip, std::string* error) {
  if (!config.insecure_skip_tls_verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(native);
    int ok = 0;
    if (verify_ip) {
      ok = X509_VERIFY_PARAM_set1_ip_asc(param, verify_name.c_str());
    } else {
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      ok = X509_VERIFY_PARAM_set1_host(param, verify_name.c_str(), verify_name.size());
    }
    if (ok != 1) {
      ERR_clear_error();
      *error = strCat("cannot verify against server name \"", verify_name, "\"");
      return false;
    }
  }
  if (!verify_ip) SSL_set_tlsext_host_name(native, verify_name.c_str());
  return true;
}

const std::string& BearerToken::current(Clock::time_point now) {
  if (config_.token_file.empty()) return token_;
  struct stat st {};  // one stat() per request is far cheaper than the request itself
  if (::stat(config_.token_file.c_str(), &st) != 0) return token_;  // keep the last token
  const bool changed = st.st_mtim.tv_sec != mtime_.tv_sec || st.st_mtim.tv_nsec != mtime_.tv_nsec ||
                       st.st_size != size_;
  if (!changed && now - read_ < std::chrono::minutes(1)) return token_;
  std::ifstream in(config_.token_file, std::ios::binary);
  if (!in) return token_;
  std::ostringstream text;
  text << in.rdbuf();
  std::string fresh(absl::StripAsciiWhitespace(text.str()));
  if (!fresh.empty()) {
    token_ = std::move(fresh);
    mtime_ = st.st_mtim;
    size_ = st.st_size;
    read_ = now;
  }
  return token_;
}

}  // namespace muster::proto::client_internal
