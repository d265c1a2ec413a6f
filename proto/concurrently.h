#pragma once

// Many requests in flight at once from a strand, and a wait for all of them.
//
//   auto mark = [&](const PodRef& ref) -> asio::awaitable<void> { ... };
//   co_await proto::forEachConcurrently(strand_, std::move(refs), 32, std::move(mark));
//
// Pass the function as a named object, moved, never as a lambda written in the call: GCC 12
// destroys a temporary argument of a coroutine called inside co_await twice, so a lambda
// capturing a shared_ptr there releases it twice (a use after free, seen in muster-scheduler;
// tests/proto/coroutine_test.cc shows the named form keeps the count right).

#include <algorithm>
#include <memory>
#include <vector>

#include "proto/asio.h"
#include "proto/coroutine.h"

namespace muster::proto {

// Runs `fn(item)` for every item, at most `limit` at once (at least one), as coroutines on
// `strand`; returns when every call has returned. `fn` returns asio::awaitable<void>.
template <typename T, typename Fn>
asio::awaitable<void> forEachConcurrently(asio::strand<asio::any_io_executor> strand,
                                          std::vector<T> items, size_t limit, Fn fn) {
  if (items.empty()) co_return;
  struct State {
    State(std::vector<T> i, Fn f, asio::strand<asio::any_io_executor> s)
        : items(std::move(i)), fn(std::move(f)), done(s) {}
    std::vector<T> items;
    Fn fn;
    size_t next = 0;
    size_t running = 0;
    asio::steady_timer done;
  };
  auto state = std::make_shared<State>(std::move(items), std::move(fn), strand);
  state->done.expires_at(asio::steady_timer::time_point::max());
  state->running = std::min(std::max<size_t>(limit, 1), state->items.size());
  for (size_t w = 0, n = state->running; w < n; ++w) {
    asio::co_spawn(
        strand,
        [state]() -> asio::awaitable<void> {
          while (state->next < state->items.size()) {
            const T& item = state->items[state->next++];
            co_await state->fn(item);
          }
          // In the past, so that a wait begun after this returns at once.
          if (--state->running == 0) state->done.expires_at(asio::steady_timer::time_point::min());
        },
        dieOnException("concurrent requests"));
  }
  boost::system::error_code ec;
  while (state->running > 0)
    co_await state->done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

}  // namespace muster::proto
