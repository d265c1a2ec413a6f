// The list/watch protocol against a scripted ListerWatcher (the seam below the transport).
// The same behaviour is exercised against a real kube-apiserver in tests/e2e.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <deque>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/informer.h"
#include "proto/json.h"

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

// A widget with a schemaless field nested `levels` objects deep under spec.launcher.spec (as a
// ParallelJob's pod template may be): the object itself nests 3 + levels deep.
std::string deepWidget(const std::string& name, const std::string& rv, int levels) {
  std::string nested;
  for (int i = 1; i < levels; ++i) nested += R"({"a":)";
  nested += "{}" + std::string(levels - 1, '}');
  return R"({"metadata":{"namespace":"ns","name":")" + name + R"(","resourceVersion":")" + rv +
         R"("},"spec":{"launcher":{"spec":)" + nested + "}}}";
}

// How deep a JSON text nests (the test's texts have no brackets inside strings).
int depthOf(std::string_view text) {
  int depth = 0, deepest = 0;
  for (char c : text) {
    if (c == '{' || c == '[') deepest = std::max(deepest, ++depth);
    if (c == '}' || c == ']') --depth;
  }
  return deepest;
}

// What is written to stderr (the structured log) while it lives; written through to stderr again
// when read, so a failing test still shows it.
class StderrCapture {
 public:
  StderrCapture() : file_(std::tmpfile()), saved_(dup(2)) {
    std::fflush(stderr);
    dup2(fileno(file_), 2);
  }
  ~StderrCapture() {
    if (saved_ >= 0) lines("");  // written through, e.g. when the test failed before reading
    std::fclose(file_);
  }
  // The lines logged so far that contain `needle`.
  std::vector<std::string> lines(std::string_view needle) {
    restore();
    std::string text;
    std::rewind(file_);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, file_)) > 0;) text.append(buf, n);
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (line.find(needle) != std::string::npos) out.push_back(line);
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
  }
  std::FILE* file_;
  int saved_;
};

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
    absl::StatusOr<std::string> page = std::move(pages.front());
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

// A collection served as the API server pages a list: at most `limit` items a page, the continue
// token the index of the next item. A page whose text would be longer than `max_page_bytes` is
// refused as the client refuses a response over its limit (ClientOptions::max_response_bytes).
struct PagedCollection {
  std::vector<std::string> items;
  size_t max_page_bytes = SIZE_MAX;
  std::vector<int64_t> limits;  // the limit of each request, in order
};

class PagedListerWatcher final : public ListerWatcher {
 public:
  explicit PagedListerWatcher(PagedCollection* c) : c_(c) {}
  asio::awaitable<absl::StatusOr<std::string>> listPage(int64_t limit, std::string cont) override {
    c_->limits.push_back(limit);
    const size_t begin = cont.empty() ? 0 : std::stoul(cont);
    const size_t end = limit > 0 ? std::min(c_->items.size(), begin + limit) : c_->items.size();
    const std::vector<std::string> items(c_->items.begin() + begin, c_->items.begin() + end);
    std::string page =
        proto::listPage(items, "100", end < c_->items.size() ? std::to_string(end) : "");
    if (page.size() > c_->max_page_bytes) {
      co_return absl::ResourceExhaustedError(absl::StrCat("the response is larger than the ",
                                                          c_->max_page_bytes, " bytes accepted"));
    }
    co_return page;
  }
  asio::awaitable<absl::Status> watch(std::string, int,
                                      std::function<absl::Status(std::string_view)>) override {
    asio::steady_timer idle(co_await asio::this_coro::executor, std::chrono::hours(1));
    boost::system::error_code ec;
    co_await idle.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    co_return absl::OkStatus();
  }
  void cancel() override {}

 private:
  PagedCollection* c_;
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

TEST_CASE("a list page cut off a million levels deep fails the list, which is retried", "[limits]") {
  // The parser does not recurse, so the depth costs no stack; the page is not JSON, so there is
  // no list to deliver.
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

TEST_CASE("an object that decodes in a watch event decodes in a list page too", "[limits]") {
  // 124 levels under spec.launcher.spec: the object nests 127 deep, its watch event 128 (the
  // limit), the list page around it 129.
  const std::string deep = deepWidget("deep", "2", 124);
  REQUIRE(depthOf(deep) == kMaxJsonDepth - 1);
  REQUIRE(parseJson(event("ADDED", deep)).ok());
  const std::string page = listPage({widget("a", "1"), deep, widget("c", "3")}, "5");
  REQUIRE_FALSE(parseJson(page).ok());  // the page as one document is beyond the limit

  asio::io_context io;  // outlives the script's timer
  Script s;
  s.lists.push_back({page});
  s.watches.push_back({{event("ADDED", deepWidget("watched", "6", 124))}});
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), fastOptions());
  Recorder rec;
  inf.addHandlers(rec.handlers());
  inf.start();
  runUntil(io, [&] { return s.watch_rvs.size() >= 2; });
  // A list's adds come in key order.
  CHECK(rec.log == std::vector<std::string>{"add a@1", "add c@3", "add deep@2", "add watched@6"});
  CHECK(inf.stats().lists == 1);
  CHECK(inf.stats().skipped_items == 0);
  CHECK(inf.stats().bad_events == 0);
  inf.stop();
}

TEST_CASE("a list item that cannot be read is skipped, counted and named, and the rest is delivered",
          "[limits]") {
  const std::string poisoned = deepWidget("poisoned", "2", 300);
  // Nameless and deeper still: named by its place in its page.
  const std::string nameless = R"({"spec":)" + std::string(1000, '[') + std::string(1000, ']') + "}";
  asio::io_context io;  // outlives the script's timer
  Script s;
  s.lists.push_back({listPage({widget("a", "1"), poisoned, widget("b", "3")}, "", "tok1"),
                     listPage({widget("c", "4"), nameless, "42", widget("d", "5")}, "9")});
  // The poisoned object is fixed: to the cache it is new, whatever the event's type says.
  s.watches.push_back({{event("MODIFIED", widget("poisoned", "10"))}});
  metrics::Counter& undecodable = undecodableObjects("widgets");
  const double undecodable_before = undecodable.value();
  ReflectorOptions options = fastOptions();
  options.name = "widgets";
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), options);
  Recorder rec;
  inf.addHandlers(rec.handlers());
  StderrCapture log;
  inf.start();
  runUntil(io, [&] { return s.watch_rvs.size() >= 2; });

  CHECK(rec.log == std::vector<std::string>{"add a@1", "add b@3", "add c@4", "add d@5",
                                            "add poisoned@10"});
  CHECK(s.watch_rvs[0] == "9");
  CHECK(inf.stats().lists == 1);
  CHECK(inf.stats().skipped_items == 3);
  CHECK(undecodable.value() - undecodable_before == 3);
  const std::vector<std::string> skipped = log.lines("Skipping list item");
  REQUIRE(skipped.size() == 3);
  CHECK(absl::StrContains(skipped[0], R"(object="ns/poisoned")"));
  CHECK(absl::StrContains(skipped[0], "nested deeper than"));
  CHECK(absl::StrContains(skipped[1], R"(object="")"));
  CHECK(absl::StrContains(skipped[1], R"(index=1)"));
  CHECK(absl::StrContains(skipped[1], R"(continue="tok1")"));
  CHECK(absl::StrContains(skipped[2], R"(index=2)"));
  CHECK(absl::StrContains(skipped[2], "expected object"));
  inf.stop();
}

TEST_CASE("an object cached before is deleted at a relist that cannot read it", "[limits]") {
  // The informer's rule for objects that do not decode: a stale copy would be acted on as if it
  // were current.
  asio::io_context io;  // outlives the script's timer
  Script s;
  s.lists.push_back({listPage({widget("a", "1"), widget("b", "2")}, "2")});
  s.watches.push_back(
      {{event("ERROR", R"({"kind":"Status","code":410,"reason":"Expired","message":"too old"})")}});
  s.lists.push_back({listPage({widget("a", "1"), deepWidget("b", "7", 300)}, "8")});
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), fastOptions());
  Recorder rec;
  inf.addHandlers(rec.handlers());
  inf.start();
  runUntil(io, [&] { return s.watch_rvs.size() >= 2; });
  CHECK(rec.log == std::vector<std::string>{"add a@1", "add b@2", "delete b"});
  CHECK(s.watch_rvs[1] == "8");
  CHECK(inf.stats().skipped_items == 1);
  inf.stop();
}

TEST_CASE("a page larger than the transport accepts is asked for again with fewer items",
          "[limits]") {
  asio::io_context io;
  PagedCollection c;
  for (int i = 0; i < 9; ++i) c.items.push_back(widget(absl::StrCat("w", i), std::to_string(i + 1)));
  // Room for three widgets a page, not four.
  c.max_page_bytes = listPage({c.items[0], c.items[1], c.items[2]}, "100", "9").size();
  ReflectorOptions options = fastOptions();
  options.page_size = 8;
  Informer<Widget> inf(std::make_unique<PagedListerWatcher>(&c), io.get_executor(), options);
  inf.start();
  runUntil(io, [&] { return inf.hasSynced(); });
  CHECK(inf.size() == 9);
  // Halved until a page fits, then kept for the rest of the list: every larger try costs a
  // response read up to the transport's limit.
  CHECK(c.limits == std::vector<int64_t>{8, 4, 2, 2, 2, 2, 2});
  CHECK(inf.stats().skipped_items == 0);
  inf.stop();
}

TEST_CASE("a single object larger than the transport accepts is reported, and fails the list",
          "[limits]") {
  // Nothing can skip it: its page never arrives. Kubernetes stores no object this large.
  asio::io_context io;
  PagedCollection c;
  c.items = {widget("a", "1"), widget("b", "2", std::string(200, 'x'))};
  c.max_page_bytes = listPage({c.items[0]}, "100", "1").size();
  Informer<Widget> inf(std::make_unique<PagedListerWatcher>(&c), io.get_executor(), fastOptions());
  inf.start();
  runUntil(io, [&] { return c.limits.size() >= 8; });
  CHECK_FALSE(inf.hasSynced());
  CHECK(c.limits[0] == 2);
  CHECK(std::count(c.limits.begin(), c.limits.end(), 1) >= 3);
  inf.stop();
}

TEST_CASE("a page longer than any one JSON document Muster accepts is delivered whole",
          "[limits]") {
  // Each object is under the limit of one watch event; together they are over the limit of one
  // document (kMaxJsonDocumentBytes). Only the transport bounds a page (ClientOptions).
  const size_t field = kMaxWatchEventBytes - 1024;
  const size_t count = kMaxJsonDocumentBytes / field + 1;
  std::string page = R"({"kind":"List","metadata":{"resourceVersion":"50"},"items":[)";
  page.reserve(count * (field + 200));
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) page += ',';
    page += widget(absl::StrCat("big", i), std::to_string(i + 1));
    page.back() = ',';  // reopen the object for one more field
    page.append(R"("blob":")").append(field, 'x').append(R"("})");
  }
  page += "]}";
  REQUIRE(page.size() > kMaxJsonDocumentBytes);

  asio::io_context io;  // outlives the script's timer
  Script s;
  s.lists.push_back({std::move(page)});
  Informer<Widget> inf(std::make_unique<FakeListerWatcher>(&s), io.get_executor(), fastOptions());
  inf.start();
  runUntil(io, [&] { return inf.hasSynced(); });
  CHECK(inf.size() == count);
  CHECK(inf.stats().skipped_items == 0);
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
