#include "tests/e2e/webhook.h"

#include <sys/socket.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "proto/codec.h"
#include "proto/json.h"
#include "rapidjson/document.h"
#include "tests/e2e/support.h"

namespace muster::e2e {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

constexpr char kConfigurations[] =
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string stringAt(const rapidjson::Value& v, const char* name) {
  auto it = v.FindMember(name);
  return it != v.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
}

}  // namespace

struct BindingWebhook::Impl {
  explicit Impl(Decide d) : decide(std::move(d)), tls(ssl::context::tls_server), acceptor(io) {}

  Decide decide;
  std::string probe_pod;  // refused, and counted apart: proves the API server calls us
  asio::io_context io;
  ssl::context tls;
  tcp::acceptor acceptor;
  std::thread accept_thread;
  std::atomic<bool> stopping{false};
  mutable std::mutex mu;
  std::vector<Review> reviews;
  int probes = 0;
  std::vector<std::thread> connections;
  std::set<int> open_fds;

  // The AdmissionReview response for one request body.
  std::string answer(const std::string& body) {
    rapidjson::Document doc;
    doc.Parse(body.c_str(), body.size());
    std::string uid;
    Review review;
    if (!doc.HasParseError() && doc.IsObject() && doc.HasMember("request") &&
        doc["request"].IsObject()) {
      const rapidjson::Value& req = doc["request"];
      uid = stringAt(req, "uid");
      review.pod_namespace = stringAt(req, "namespace");
      review.pod = stringAt(req, "name");
      if (req.HasMember("object") && req["object"].IsObject() &&
          req["object"].HasMember("target") && req["object"]["target"].IsObject())
        review.node = stringAt(req["object"]["target"], "name");
    }
    Decision d;
    if (review.pod == probe_pod) {
      std::lock_guard<std::mutex> lock(mu);
      ++probes;
      d = refuse(400, "probe");
    } else {
      Decide current;
      {
        std::lock_guard<std::mutex> lock(mu);
        reviews.push_back(review);
        current = decide;
      }
      d = current(review);
    }
    proto::JsonWriter w;
    w.beginObject().stringField("apiVersion", "admission.k8s.io/v1");
    w.stringField("kind", "AdmissionReview");
    w.key("response").beginObject().stringField("uid", uid).booleanField("allowed", d.allowed);
    if (!d.allowed) {
      w.key("status").beginObject().integerField("code", d.code);
      w.stringField("message", d.message).endObject();
    }
    w.endObject().endObject();
    return w.str();
  }

  void serve(tcp::socket socket) {
    int fd = socket.native_handle();
    {
      std::lock_guard<std::mutex> lock(mu);
      open_fds.insert(fd);
    }
    beast::error_code ec;
    ssl::stream<tcp::socket> stream(std::move(socket), tls);
    stream.handshake(ssl::stream_base::server, ec);
    beast::flat_buffer buffer;
    while (!ec && !stopping) {
      http::request<http::string_body> req;
      http::read(stream, buffer, req, ec);
      if (ec) break;
      http::response<http::string_body> res{http::status::ok, req.version()};
      res.set(http::field::content_type, "application/json");
      res.keep_alive(req.keep_alive());
      res.body() = answer(req.body());
      res.prepare_payload();
      http::write(stream, res, ec);
      if (!req.keep_alive()) break;
    }
    std::lock_guard<std::mutex> lock(mu);
    open_fds.erase(fd);
    stream.next_layer().close(ec);
  }

  void start() {
    const std::string pki = TestCluster::get().dir() + "/pki/";
    tls.use_certificate_chain_file(pki + "apiserver.crt");
    tls.use_private_key_file(pki + "apiserver.key", ssl::context::pem);
    tcp::endpoint at(asio::ip::make_address("127.0.0.1"), 0);
    acceptor.open(at.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(at);
    acceptor.listen();
    accept_thread = std::thread([this] {
      while (!stopping) {
        tcp::socket socket(io);
        beast::error_code ec;
        acceptor.accept(socket, ec);
        if (ec || stopping) break;
        std::lock_guard<std::mutex> lock(mu);
        connections.emplace_back([this, s = std::move(socket)]() mutable { serve(std::move(s)); });
      }
    });
  }

  void stop() {
    stopping = true;
    ::shutdown(acceptor.native_handle(), SHUT_RDWR);
    if (accept_thread.joinable()) accept_thread.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (int fd : open_fds) ::shutdown(fd, SHUT_RDWR);
      threads.swap(connections);
    }
    for (auto& t : threads) t.join();
    beast::error_code ec;
    acceptor.close(ec);
  }
};

BindingWebhook::BindingWebhook(proto::Client& client, Decide decide)
    : impl_(std::make_shared<Impl>(std::move(decide))),
      client_(client),
      name_(uniqueName("e2e-bindings")) {
  impl_->probe_pod = name_ + "-probe";
  impl_->start();
  const std::string ca = readFile(TestCluster::get().dir() + "/pki/ca.crt");
  REQUIRE_FALSE(ca.empty());
  proto::JsonWriter w;
  w.beginObject().stringField("apiVersion", "admissionregistration.k8s.io/v1");
  w.stringField("kind", "ValidatingWebhookConfiguration");
  w.key("metadata").beginObject().stringField("name", name_).endObject();
  w.key("webhooks").beginArray().beginObject();
  w.stringField("name", "bindings.e2e.muster.dev");
  w.key("clientConfig").beginObject();
  w.stringField("url", absl::StrCat("https://127.0.0.1:", impl_->acceptor.local_endpoint().port(),
                                    "/validate"));
  w.stringField("caBundle", absl::Base64Escape(ca)).endObject();
  w.key("rules").beginArray().beginObject();
  w.key("apiGroups").beginArray().string("").endArray();
  w.key("apiVersions").beginArray().string("v1").endArray();
  w.key("operations").beginArray().string("CREATE").endArray();
  w.key("resources").beginArray().string("pods/binding").endArray();
  w.stringField("scope", "Namespaced").endObject().endArray();
  // Fail: a binding the webhook did not see would make a test's refusal silently not happen.
  w.stringField("failurePolicy", "Fail").stringField("sideEffects", "None");
  w.key("admissionReviewVersions").beginArray().string("v1").endArray();
  w.integerField("timeoutSeconds", 20);
  w.endObject().endArray().endObject();
  proto::Request create;
  create.verb = proto::Verb::kPost;
  create.path = kConfigurations;
  create.body = w.str();
  auto created = client_.callSync(create);
  INFO(created.status().ToString());
  REQUIRE(created.ok());

  // The API server picks the configuration up asynchronously: bind a pod nobody schedules until
  // the webhook has been asked (it refuses the probe, so the pod stays unbound).
  proto::Request pod;
  pod.verb = proto::Verb::kPost;
  pod.path = proto::resources::kPods.collectionPath("default");
  pod.body = absl::StrCat(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")",
                          impl_->probe_pod,
                          R"("},"spec":{"schedulerName":"none","containers":[{"name":"c","image":"x"}]}})");
  REQUIRE(client_.callSync(pod).ok());
  REQUIRE(waitFor([&] { return probe(); }, std::chrono::seconds(30), std::chrono::milliseconds(200)));
}

bool BindingWebhook::probe() {
  int before;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    before = impl_->probes;
  }
  proto::Binding b;
  b.meta.name = impl_->probe_pod;
  b.meta.namespace_ = "default";
  b.target_node = "nowhere";
  proto::Request bind;
  bind.verb = proto::Verb::kPost;
  bind.path = proto::resources::kPods.objectPath("default", impl_->probe_pod, "binding");
  bind.body = proto::encode(b);
  (void)client_.callSync(bind);
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->probes > before;
}

BindingWebhook::~BindingWebhook() {
  proto::Request del;
  del.verb = proto::Verb::kDelete;
  del.path = absl::StrCat(kConfigurations, "/", name_);
  (void)client_.callSync(del);
  // The API server forgets the configuration asynchronously too: keep serving (and letting
  // everything but the probe through) until a probe binding no longer reaches us, so the next
  // test's bindings never meet a webhook that is gone (failurePolicy Fail).
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->decide = [](const Review&) { return allow(); };
  }
  (void)waitFor([&] { return !probe(); }, std::chrono::seconds(30), std::chrono::milliseconds(100));
  del.path = proto::resources::kPods.objectPath("default", impl_->probe_pod);
  (void)client_.callSync(del);
  impl_->stop();
}

std::vector<BindingWebhook::Review> BindingWebhook::reviews() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->reviews;
}

int BindingWebhook::reviewsOf(const std::string& pod) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  int n = 0;
  for (const Review& r : impl_->reviews) n += r.pod == pod;
  return n;
}

}  // namespace muster::e2e
