#pragma once

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>; include it first.
#include <utility>

#include <boost/asio.hpp>

namespace muster::proto {
namespace asio = boost::asio;
}  // namespace muster::proto
