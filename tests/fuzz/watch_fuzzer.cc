// What the API server sends an informer: the first line of the input is a list page, the rest is
// the body of a watch, framed into events by proto::LineSplitter as the client does. A real
// Informer<Pod> (reflector, decoding, cache, index, handlers) consumes both through a scripted
// ListerWatcher; the second list or watch call ends the run.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "proto/client.h"
#include "proto/informer.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;
namespace asio = boost::asio;

namespace {

class ScriptedListerWatcher final : public proto::ListerWatcher {
 public:
  ScriptedListerWatcher(std::string page, std::string stream, std::function<void()> stop)
      : page_(std::move(page)), stream_(std::move(stream)), stop_(std::move(stop)) {}

  asio::awaitable<absl::StatusOr<std::string>> listPage(int64_t, std::string) override {
    if (lists_++ > 0) {
      stop_();
      co_return absl::UnavailableError("done");
    }
    co_return page_;
  }
  asio::awaitable<absl::Status> watch(
      std::string, int, std::function<absl::Status(std::string_view)> on_line) override {
    if (watches_++ > 0) {
      stop_();
      co_return absl::CancelledError("done");
    }
    // Deliver the stream in chunks of varying size, as TCP would.
    proto::LineSplitter splitter;
    size_t at = 0;
    size_t chunk = 1;
    while (at < stream_.size()) {
      const size_t n = std::min(chunk, stream_.size() - at);
      if (absl::Status s = splitter.feed(std::string_view(stream_).substr(at, n), on_line); !s.ok())
        co_return s;
      at += n;
      chunk = chunk * 3 % 61 + 1;
    }
    if (splitter.pending() > 0) co_return splitter.feed("\n", on_line);
    co_return absl::OkStatus();
  }
  void cancel() override {}

 private:
  std::string page_, stream_;
  std::function<void()> stop_;
  int lists_ = 0, watches_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = fuzz::asText(data, size);
  const size_t nl = input.find('\n');
  std::string page(input.substr(0, nl));
  std::string stream(nl == std::string_view::npos ? std::string_view() : input.substr(nl + 1));

  asio::io_context io;
  proto::ReflectorOptions options;
  options.initial_backoff = std::chrono::milliseconds(0);
  options.max_backoff = std::chrono::milliseconds(0);
  options.name = "fuzz";
  proto::Informer<proto::Pod>* informer_ptr = nullptr;
  auto lw = std::make_unique<ScriptedListerWatcher>(std::move(page), std::move(stream),
                                                    [&] { informer_ptr->stop(); });
  proto::Informer<proto::Pod> informer(std::move(lw), io.get_executor(), options);
  informer_ptr = &informer;
  informer.addIndex(proto::kPodsByNodeIndex, [](const proto::Pod& p) {
    return p.spec.node_name.empty() ? std::vector<std::string>{}
                                    : std::vector<std::string>{p.spec.node_name};
  });
  size_t adds = 0, deletes = 0;
  informer.addHandlers({[&](const auto&) { ++adds; }, [](const auto&, const auto&) {},
                        [&](const auto&) { ++deletes; }});
  informer.start();
  io.run();
  FUZZ_CHECK(informer.size() <= adds, "every cached object was announced");
  for (const auto& pod : informer.list()) {
    (void)informer.byIndex(proto::kPodsByNodeIndex, pod->spec.node_name);
  }
  return 0;
}
