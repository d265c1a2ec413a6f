// The list/watch protocol against a scripted ListerWatcher (the seam below the transport).
// The same behaviour is exercised against a real kube-apiserver in tests/e2e.
#include <catch2/catch.hpp>

#include <deque>
#include <string>
#include <vector>

#include "proto/informer.h"

namespace muster::proto {
namespace {

struct Widget {
  struct {
    std::string namespace_, name, resource_version, uid;
  } meta;
  std::string node;
};

// Found by argument-dependent lookup from Informer<Widget>.
absl::Status decode(const rapidjson::Value& v, Widget* out) {
  if (!v.IsObject() || !v.HasMember("metadata") || !v["metadata"].IsObject())
    return absl::InvalidArgumentError("metadata: expected object");
  const auto& m = v["metadata"];
  if (!m.HasMember("name") || !m["name"].IsString())
    return absl::InvalidArgumentError("metadata.name: expected string");
  out->meta.name = m["name"].GetString();
  if (m.HasMember("namespace") && m["namespace"].IsString())
    out->meta.namespace_ = m["namespace"].GetString();
  if (m.HasMember("resourceVersion") && m["resourceVersion"].IsString())
    out->meta.resource_version = m["resourceVersion"].GetString();
  if (v.HasMember("node")) {
    if (!v["node"].IsString()) return absl::InvalidArgumentError("node: expected string");
    out->node = v["node"].GetString();
  }
  return absl::OkStatus();
}

std::string widget(const std::string& name, const std::string& rv, const std::string& node = "") {
  return R"({"metadata":{"namespace":"ns","name":")" + name + R"(","resourceVersion":")" + rv +
         R"("},"node":")" + node + R"("})";
}
std::string event(const std::string& type, const std::string& object) {
  return R"({"type":")" + type + R"(","object":)" + object + "}";
}
std::string listPage(const std::vector<std::string>& items, const std::string& rv,
                     const std::string& cont = "") {
  std::string out = R"({"kind":"List","metadata":{"resourceVersion":")" + rv +
                    R"(","continue":")" + cont + R"("},"items":[)";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
  return out + "]}";
}

// What one watch call does: deliver `lines` (each may be split by the transport, which the
// client reassembles before us), then end with `result`.
struct WatchScript {
  std::vector<std::string> lines;
  absl::Status result = absl::OkStatus();
  bool hold = false;  // wait for Script::release() before delivering the lines
};

struct Script {
  std::deque<std::vector<absl::StatusOr<std::string>>> lists;  // pages of each list, in order
  std::deque<WatchScript> watches;
  std::vector<std::string> watch_rvs;  // the resourceVersion each watch asked for
  std::vector<std::string> continue_tokens;
  int list_calls = 0;
  std::unique_ptr<asio::steady_timer> gate;  // what a held watch waits on
  bool holding = false;
  void release() {
    if (gate) gate->cancel();
  }
};

class FakeListerWatcher final : public ListerWatcher {
 public:
  explicit FakeListerWatcher(Script* script) : s_(script) {}
  asio::awaitable<absl::StatusOr<std::string>> listPage(int64_t, std::string cont) override {
    s_->continue_tokens.push_back(cont);
    if (s_->lists.empty()) co_return absl::UnavailableError("no list scripted");
    auto& pages = s_->lists.front();
    absl::StatusOr<std::string> page = pages.front();
    pages.erase(pages.begin());
    if (pages.empty()) s_->lists.pop_front();
    ++s_->list_calls;
    co_return page;
  }
  asio::awaitable<absl::Status> watch(std::string rv, int,
                                      std::function<absl::Status(std::string_view)> on_line) override {
    s_->watch_rvs.push_back(rv);
    if (s_->watches.empty()) {
      // Nothing more scripted: behave like an idle watch until the test is done.
      asio::steady_timer idle(co_await asio::this_coro::executor, std::chrono::hours(1));
      boost::system::error_code ec;
      co_await idle.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      co_return absl::OkStatus();
    }
    WatchScript w = s_->watches.front();
    s_->watches.pop_front();
    if (w.hold) {
      s_->gate = std::make_unique<asio::steady_timer>(co_await asio::this_coro::executor,
                                                      std::chrono::hours(1));
      s_->holding = true;
      boost::system::error_code ec;
      co_await s_->gate->async_wait(asio::redirect_error(asio::use_awaitable, ec));
      s_->holding = false;
    }
    for (const auto& line : w.lines) {
      absl::Status st = on_line(line);
      if (!st.ok()) co_return st;
    }
    co_return w.result;
  }
  void cancel() override { s_->release(); }

 private:
  Script* s_;
};

struct Recorder {
  std::vector<std::string> log;
  InformerHandlers<Widget> handlers() {
    return {
        [this](const auto& o) { log.push_back("add " + o->meta.name + "@" + o->meta.resource_version); },
        [this](const auto& a, const auto& b) {
          log.push_back("update " + b->meta.name + " " + a->meta.resource_version + "->" +
                        b->meta.resource_version);
        },
        [this](const auto& o) { log.push_back("delete " + o->meta.name); },
    };
  }
};

ReflectorOptions fastOptions() {
  ReflectorOptions o;
  o.initial_backoff = std::chrono::milliseconds(1);
  o.max_backoff = std::chrono::milliseconds(5);
  o.page_size = 2;
  return o;
}

// Runs the io_context until `done` holds, failing the test after a generous deadline.
template <class Pred>
void runUntil(asio::io_context& io, Pred done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.run_one_for(std::chrono::milliseconds(10));
  }
  REQUIRE(done());
}

}  // namespace

TEST_CASE("the informer lists page by page, then watches from the list's resourceVersion") {
  asio::io_context io;  // outlives the script's timer
  Script s;
  s.lists.push_back({listPage({widget("a", "10"), widget("b", "11")}, "", "tok1"),
                     listPage({widget("c", "12")}, "20")});
  s.watches.push_back({{event("ADDED", widget("d", "21")), event("MODIFIED", widget("a", "22")),
                        event("DELETED", widget("b", "23"))}});
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), fastOptions());
  Recorder rec;
  inf.addHandlers(rec.handlers());
  inf.start();
  runUntil(io, [&] { return s.watch_rvs.size() >= 2; });

  CHECK(s.continue_tokens == std::vector<std::string>{"", "tok1"});
  CHECK(s.watch_rvs[0] == "20");
  CHECK(s.watch_rvs[1] == "23");  // the stream ended normally: resume from the last event
  CHECK(rec.log == std::vector<std::string>{"add a@10", "add b@11", "add c@12", "add d@21",
                                            "update a 10->22", "delete b"});
  CHECK(inf.size() == 3);
  CHECK(inf.get("ns", "b") == nullptr);
  CHECK(inf.get("ns", "a")->meta.resource_version == "22");
  CHECK(inf.hasSynced());
  CHECK(inf.stats().lists == 1);
  inf.stop();
}

TEST_CASE("the handlers have seen the whole first list before the informer reports synced") {
  asio::io_context io;  // outlives the script's timer
  Script s;
  s.lists.push_back({listPage({widget("a", "10"), widget("b", "11"), widget("c", "12")}, "20")});
  s.watches.push_back({{}});
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), fastOptions());
  std::vector<bool> synced_at_add;
  inf.addHandlers({[&](const auto&) { synced_at_add.push_back(inf.hasSynced()); },
                   [](const auto&, const auto&) {}, [](const auto&) {}});
  inf.start();
  runUntil(io, [&] { return inf.hasSynced(); });
  CHECK(synced_at_add == std::vector<bool>{false, false, false});
  inf.stop();
}

TEST_CASE("a bookmark moves the resume point without touching the cache") {
  asio::io_context io;  // outlives the script's timer
  Script s;
  s.lists.push_back({listPage({widget("a", "5")}, "5")});
  s.watches.push_back({{R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"99"}}})"}});
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), fastOptions());
  Recorder rec;
  inf.addHandlers(rec.handlers());
  inf.start();
  runUntil(io, [&] { return s.watch_rvs.size() >= 2; });
  CHECK(s.watch_rvs[1] == "99");
  CHECK(rec.log == std::vector<std::string>{"add a@5"});
  CHECK(inf.stats().bookmarks == 1);
  inf.stop();
}

TEST_CASE("an ERROR 410 event relists and replaces the cache, deleting what vanished") {
  asio::io_context io;  // outlives the script's timer
  Script s;
  s.lists.push_back({listPage({widget("a", "1"), widget("b", "2"), widget("c", "3")}, "3")});
  s.watches.push_back(
      {{event("ERROR", R"({"kind":"Status","code":410,"reason":"Expired","message":"too old"})")}});
  // Meanwhile b was deleted, c changed, d created.
  s.lists.push_back({listPage({widget("a", "1"), widget("c", "40"), widget("d", "41")}, "50")});
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), fastOptions());
  Recorder rec;
  inf.addHandlers(rec.handlers());
  inf.start();
  runUntil(io, [&] { return s.watch_rvs.size() >= 2; });
  CHECK(s.watch_rvs[1] == "50");
  CHECK(rec.log == std::vector<std::string>{"add a@1", "add b@2", "add c@3", "delete b",
                                            "update c 3->40", "add d@41"});
  CHECK(inf.stats().relists_gone == 1);
  CHECK(inf.stats().lists == 2);
  CHECK(inf.size() == 3);
  inf.stop();
}

TEST_CASE("a 410 answer to the watch request relists") {
  asio::io_context io;  // outlives the script's timer
  Script s;
  s.lists.push_back({listPage({widget("a", "1")}, "1")});
  s.watches.push_back({{}, apiError(410, R"({"kind":"Status","code":410,"reason":"Expired","message":"too old resource version"})", "watch")});
  s.lists.push_back({listPage({}, "9")});
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), fastOptions());
  Recorder rec;
  inf.addHandlers(rec.handlers());
  inf.start();
  runUntil(io, [&] { return s.watch_rvs.size() >= 2; });
  CHECK(rec.log == std::vector<std::string>{"add a@1", "delete a"});
  CHECK(s.watch_rvs[1] == "9");
  inf.stop();
}

TEST_CASE("a dropped connection resumes the watch from the last resourceVersion without a relist") {
  asio::io_context io;  // outlives the script's timer
  Script s;
  s.lists.push_back({listPage({}, "7")});
  s.watches.push_back({{event("ADDED", widget("a", "8"))}, absl::UnavailableError("connection reset")});
  s.watches.push_back({{event("ADDED", widget("b", "9"))}, absl::UnavailableError("connection reset")});
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), fastOptions());
  inf.start();
  runUntil(io, [&] { return s.watch_rvs.size() >= 3; });
  CHECK(s.watch_rvs == std::vector<std::string>{"7", "8", "9"});
  CHECK(inf.stats().lists == 1);
  CHECK(inf.stats().watch_errors == 2);
  CHECK(inf.size() == 2);
  inf.stop();
}

TEST_CASE("a failed list is retried with backoff and nothing is synced until it succeeds") {
  asio::io_context io;  // outlives the script's timer
  Script s;
  s.lists.push_back({absl::StatusOr<std::string>(absl::UnavailableError("apiserver down"))});
  s.lists.push_back({listPage({widget("a", "1")}, "1")});
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), fastOptions());
  CHECK_FALSE(inf.hasSynced());
  inf.start();
  runUntil(io, [&] { return inf.hasSynced(); });
  CHECK(s.list_calls == 2);
  CHECK(inf.size() == 1);
  inf.stop();
}

TEST_CASE("an API that may be absent: 404 is an empty synced cache, and it is picked up once served") {
  asio::io_context io;
  Script s;
  auto not_found = [] {
    return absl::StatusOr<std::string>(apiError(404, R"({"kind":"Status","reason":"NotFound",
        "message":"the server could not find the requested resource","code":404})", "list"));
  };
  s.lists.push_back({not_found()});
  s.lists.push_back({listPage({widget("a", "1")}, "1")});
  // Served for a while, then gone again at the next list (the feature gate turned off): what was
  // listed goes.
  s.watches.push_back({{}, apiError(410, R"({"kind":"Status","code":410,"reason":"Expired"})", "watch")});
  s.lists.push_back({not_found()});
  ReflectorOptions o = fastOptions();
  o.may_be_absent = true;
  Recorder r;
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), o);
  inf.addHandlers(r.handlers());
  inf.start();
  runUntil(io, [&] { return inf.hasSynced(); });
  runUntil(io, [&] { return r.log.size() >= 2; });
  CHECK(r.log == std::vector<std::string>{"add a@1", "delete a"});
  CHECK(inf.size() == 0);
  inf.stop();
}

TEST_CASE("without may_be_absent a 404 list is an error: nothing synced, retried") {
  asio::io_context io;
  Script s;
  s.lists.push_back({absl::StatusOr<std::string>(apiError(404, "", "list"))});
  s.lists.push_back({absl::StatusOr<std::string>(apiError(404, "", "list"))});
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), fastOptions());
  inf.start();
  runUntil(io, [&] { return s.list_calls == 2; });
  CHECK_FALSE(inf.hasSynced());
  inf.stop();
}

TEST_CASE("an undecodable event is skipped and the watch goes on") {
  asio::io_context io;  // outlives the script's timer
  Script s;
  s.lists.push_back({listPage({}, "1")});
  s.watches.push_back({{"{not json", event("ADDED", R"({"metadata":{"name":5}})"),
                        R"({"type":"SURPRISE","object":{}})", event("ADDED", widget("ok", "2"))}});
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), fastOptions());
  inf.start();
  runUntil(io, [&] { return s.watch_rvs.size() >= 2; });
  CHECK(inf.size() == 1);
  CHECK(inf.get("ns", "ok") != nullptr);
  CHECK(inf.stats().bad_events == 2);  // the bad JSON and the unknown type; the bad object is
                                       // refused by decode and logged
  inf.stop();
}

TEST_CASE("an object that stops decoding is treated as deleted, listed or watched, and counted") {
  const std::string bad_a = R"({"metadata":{"namespace":"ns","name":"a","resourceVersion":"3"},"node":5})";
  const std::string bad_c = R"({"metadata":{"namespace":"ns","name":"c","resourceVersion":"1"},"node":[]})";
  asio::io_context io;  // outlives the script's timer
  Script s;
  s.lists.push_back({listPage({widget("a", "1", "n1"), bad_c}, "2")});
  s.watches.push_back({{event("MODIFIED", bad_a), event("ADDED", widget("b", "4"))}});
  metrics::Counter& undecodable = undecodableObjects("widgets");
  const double before = undecodable.value();
  ReflectorOptions options = fastOptions();
  options.name = "widgets";
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), options);
  inf.addIndex("node", [](const Widget& w) { return std::vector<std::string>{w.node}; });
  Recorder r;
  inf.addHandlers(r.handlers());
  inf.start();
  runUntil(io, [&] { return inf.get("ns", "b") != nullptr; });
  CHECK(inf.get("ns", "a") == nullptr);  // no stale copy of a
  CHECK(inf.get("ns", "c") == nullptr);  // never cached
  CHECK(inf.byIndex("node", "n1").empty());
  CHECK(r.log == std::vector<std::string>{"add a@1", "delete a", "add b@4"});
  CHECK(undecodable.value() - before == 2);
  CHECK(inf.lastResourceVersion() == "4");
  inf.stop();
}

TEST_CASE("a watch event nested too deep is skipped like any undecodable one", "[limits]") {
  // A million levels: RapidJSON's recursive parser overflowed the stack on this.
  const std::string deep = R"({"type":"ADDED","object":)" + std::string(1000000, '[');
  asio::io_context io;  // outlives the script's timer
  Script s;
  s.lists.push_back({listPage({}, "1")});
  s.watches.push_back({{deep, event("ADDED", widget("ok", "2"))}});
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), fastOptions());
  inf.start();
  runUntil(io, [&] { return s.watch_rvs.size() >= 2; });
  CHECK(inf.get("ns", "ok") != nullptr);
  CHECK(inf.stats().bad_events == 1);
  inf.stop();
}

TEST_CASE("a list page nested too deep fails the list, which is retried", "[limits]") {
  asio::io_context io;  // outlives the script's timer
  Script s;
  s.lists.push_back({std::string(R"({"items":)") + std::string(1000000, '[')});
  s.lists.push_back({listPage({widget("a", "1")}, "1")});
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), fastOptions());
  inf.start();
  runUntil(io, [&] { return inf.hasSynced(); });
  CHECK(s.list_calls == 2);
  CHECK(inf.size() == 1);
  inf.stop();
}

TEST_CASE("a secondary index follows objects as they move and disappear") {
  asio::io_context io;  // outlives the script's timer
  Script s;
  s.lists.push_back({listPage({widget("a", "1", "n1"), widget("b", "2", "n1")}, "2")});
  s.watches.push_back({{event("MODIFIED", widget("a", "3", "n2")), event("DELETED", widget("b", "4", "n1"))},
                       absl::OkStatus(),
                       /*hold=*/true});
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), fastOptions());
  inf.addIndex("node", [](const Widget& w) {
    return w.node.empty() ? std::vector<std::string>{} : std::vector<std::string>{w.node};
  });
  inf.start();
  runUntil(io, [&] { return s.holding; });
  CHECK(inf.byIndex("node", "n1").size() == 2);
  s.release();
  runUntil(io, [&] { return s.watch_rvs.size() >= 2; });
  CHECK(inf.byIndex("node", "n1").empty());
  REQUIRE(inf.byIndex("node", "n2").size() == 1);
  CHECK(inf.byIndex("node", "n2")[0]->meta.name == "a");
  inf.stop();
}

}  // namespace muster::proto
