#include "scheduler/tenancy/fair_share.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/numeric/int128.h"
#include "absl/strings/string_view.h"

namespace muster::scheduler::tenancy {
namespace {

// Debian's abseil has its own absl::string_view, which a std::string_view does not convert to.
absl::string_view av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Fractional remainders closer than this are ties (decided by name).
constexpr double kRemainderResolution = 1e9;

// One participant of a parent's division: a child, or the parent's own work.
struct Participant {
  size_t queue = 0;
  bool own = false;  // the parent's own work (the pseudo-child)
  const std::string* name = nullptr;
  int64_t cap = 0;    // min(demand, limit)
  int64_t quota = 0;  // effective quota
  double weight = 1.0;
  double usage = 0;   // decayed usage
  double effective_weight = 1.0;
  double amount = 0;  // the share, before rounding
  int64_t rounded = 0;
  int64_t remainder_key = 0;  // the fractional remainder × kRemainderResolution
};

// Divides `total` among `parts` (see the top comment of fair_share.h); sets each one's rounded.
// `order` is scratch space.
void divide(int64_t total, std::vector<Participant>& parts, const FairShareOptions& options,
            std::vector<Participant*>& order) {
  absl::int128 cap_sum = 0;
  double quota_sum = 0;
  for (Participant& p : parts) {
    cap_sum += p.cap;
    p.amount = static_cast<double>(std::min(p.cap, p.quota));
    quota_sum += p.amount;
  }
  const int64_t target = cap_sum < total ? static_cast<int64_t>(cap_sum) : total;
  const double available = static_cast<double>(total);

  if (quota_sum > available) {
    // 1. Quotas over-committed: scale them down to what there is; nothing is left over.
    const double scale = available / quota_sum;
    for (Participant& p : parts) p.amount *= scale;
  } else {
    // 2. Water-fill the rest by effective weight.
    double weight_sum = 0;
    double usage_sum = 0;
    for (const Participant& p : parts) {
      if (p.cap <= 0) continue;
      weight_sum += p.weight;
      usage_sum += p.usage;
    }
    order.clear();
    for (Participant& p : parts) {
      if (static_cast<double>(p.cap) <= p.amount) continue;
      p.effective_weight = p.weight;
      if (options.use_usage) {
        const double s = p.weight / weight_sum;
        double u = usage_sum > 0 ? p.usage / usage_sum : s;
        if (options.usage_horizon_seconds > 0 && total > 0) {
          const double c = std::min(
              1.0, usage_sum / (static_cast<double>(total) * options.usage_horizon_seconds));
          u = s + c * (u - s);
        }
        p.effective_weight *= usageCorrection(s, u, options.min_correction);
      }
      order.push_back(&p);
    }
    // By how far each can rise (room / weight); those that fill up first come first.
    auto key = [](const Participant* p) {
      return (static_cast<double>(p->cap) - p->amount) / p->effective_weight;
    };
    std::sort(order.begin(), order.end(), [&key](const Participant* a, const Participant* b) {
      const double ka = key(a);
      const double kb = key(b);
      if (ka != kb) return ka < kb;
      return *a->name < *b->name;
    });
    double left = available - quota_sum;
    double weight_left = 0;
    for (const Participant* p : order) weight_left += p->effective_weight;
    for (size_t k = 0; k < order.size() && left > 0; ++k) {
      Participant& p = *order[k];
      const double room = static_cast<double>(p.cap) - p.amount;
      const double level = left / weight_left;
      if (room <= level * p.effective_weight) {
        p.amount = static_cast<double>(p.cap);
        left -= room;
        weight_left -= p.effective_weight;
        continue;
      }
      // Nobody from here on fills up: each gets the same level × its weight.
      for (size_t m = k; m < order.size(); ++m) {
        order[m]->amount += level * order[m]->effective_weight;
      }
      break;
    }
  }

  // Round down, then hand out (or, after floating-point error, take back) single units so that
  // the sum is exactly the target.
  int64_t sum = 0;
  for (Participant& p : parts) {
    const double whole = std::floor(p.amount);
    p.rounded = std::clamp<int64_t>(static_cast<int64_t>(whole), 0, p.cap);
    p.remainder_key = std::llround((p.amount - whole) * kRemainderResolution);
    sum += p.rounded;
  }
  int64_t missing = target - sum;
  if (missing == 0) return;
  order.clear();
  for (Participant& p : parts) order.push_back(&p);
  const bool give = missing > 0;
  std::sort(order.begin(), order.end(), [give](const Participant* a, const Participant* b) {
    if (a->remainder_key != b->remainder_key) {
      return give ? a->remainder_key > b->remainder_key : a->remainder_key < b->remainder_key;
    }
    return give ? *a->name < *b->name : *a->name > *b->name;
  });
  while (missing != 0) {
    for (Participant* p : order) {
      if (give && p->rounded < p->cap) {
        ++p->rounded;
        --missing;
      } else if (!give && p->rounded > 0) {
        --p->rounded;
        ++missing;
      }
      if (missing == 0) break;
    }
  }
}

}  // namespace

double usageCorrection(double weight_fraction, double usage_fraction, double min_correction) {
  return std::max(min_correction, std::exp2(1.0 - usage_fraction / weight_fraction));
}

FairShare FairShare::compute(const QueueTree& tree, const FairShareInput& input,
                             const FairShareOptions& options) {
  FairShare fs;
  const size_t n = tree.size();
  for (const auto& [resource, amount] : input.capacity) fs.resources_.push_back(resource);
  for (size_t q = 0; q < n && q < input.demand.size(); ++q) {
    for (const auto& [resource, amount] : input.demand[q]) fs.resources_.push_back(resource);
  }
  std::sort(fs.resources_.begin(), fs.resources_.end());
  fs.resources_.erase(std::unique(fs.resources_.begin(), fs.resources_.end()),
                      fs.resources_.end());
  const size_t resources = fs.resources_.size();
  for (size_t r = 0; r < resources; ++r) fs.resource_index_[fs.resources_[r]] = static_cast<int>(r);

  // Own and subtree demand and usage, per resource.
  fs.demand_.assign(resources, std::vector<int64_t>(n, 0));
  fs.share_.assign(resources, std::vector<int64_t>(n, 0));
  fs.own_share_.assign(resources, std::vector<int64_t>(n, 0));
  std::vector<std::vector<int64_t>> own_demand(resources, std::vector<int64_t>(n, 0));
  std::vector<std::vector<double>> own_usage(resources, std::vector<double>(n, 0));
  for (size_t q = 0; q < n && q < input.demand.size(); ++q) {
    for (const auto& [resource, amount] : input.demand[q]) {
      own_demand[fs.resource_index_.at(resource)][q] = std::max<int64_t>(0, amount);
    }
  }
  if (options.use_usage) {
    for (size_t q = 0; q < n && q < input.usage.size(); ++q) {
      for (const auto& [resource, amount] : input.usage[q]) {
        auto it = fs.resource_index_.find(resource);
        if (it == fs.resource_index_.end() || !std::isfinite(amount) || amount <= 0) continue;
        own_usage[it->second][q] = amount;
      }
    }
  }
  std::vector<std::vector<double>> usage = own_usage;
  fs.demand_ = own_demand;
  const std::vector<size_t>& top_down = tree.topDown();
  for (auto it = top_down.rbegin(); it != top_down.rend(); ++it) {
    if (*it == QueueTree::kRoot) continue;
    const size_t p = tree.parent(*it);
    for (size_t r = 0; r < resources; ++r) {
      fs.demand_[r][p] += fs.demand_[r][*it];
      usage[r][p] += usage[r][*it];
    }
  }

  std::vector<Participant> parts;
  std::vector<Participant*> order;
  for (size_t r = 0; r < resources; ++r) {
    const std::string& resource = fs.resources_[r];
    auto capacity = input.capacity.find(resource);
    fs.share_[r][QueueTree::kRoot] =
        capacity == input.capacity.end() ? 0 : std::max<int64_t>(0, capacity->second);
    for (size_t p : top_down) {
      parts.clear();
      if (own_demand[r][p] > 0) {
        Participant& own = parts.emplace_back();
        own.queue = p;
        own.own = true;
        own.name = &tree.name(p);
        own.cap = own_demand[r][p];
        own.usage = own_usage[r][p];
      }
      for (size_t c : tree.children(p)) {
        Participant& child = parts.emplace_back();
        child.queue = c;
        child.name = &tree.name(c);
        child.cap = fs.demand_[r][c];
        if (const ResourceQuota* q = tree.effective(c, resource)) {
          if (q->limit) child.cap = std::min(child.cap, *q->limit);
          child.quota = q->quota;
          child.weight = q->over_quota_weight;
        }
        child.usage = usage[r][c];
      }
      if (parts.empty()) continue;
      divide(fs.share_[r][p], parts, options, order);
      for (const Participant& part : parts) {
        (part.own ? fs.own_share_ : fs.share_)[r][part.queue] = part.rounded;
      }
    }
  }
  return fs;
}

int FairShare::resourceIndex(std::string_view resource) const {
  auto it = resource_index_.find(av(resource));
  return it == resource_index_.end() ? -1 : it->second;
}

int64_t FairShare::share(size_t queue, std::string_view resource) const {
  const int r = resourceIndex(resource);
  return r < 0 ? 0 : share_[r][queue];
}

int64_t FairShare::ownShare(size_t queue, std::string_view resource) const {
  const int r = resourceIndex(resource);
  return r < 0 ? 0 : own_share_[r][queue];
}

int64_t FairShare::demand(size_t queue, std::string_view resource) const {
  const int r = resourceIndex(resource);
  return r < 0 ? 0 : demand_[r][queue];
}

namespace {

template <class ShareOf>
double dominant(const Amounts& allocated, ShareOf share_of) {
  double key = 0;
  for (const auto& [resource, amount] : allocated) {
    if (amount <= 0) continue;
    const int64_t share = share_of(resource);
    if (share <= 0) return std::numeric_limits<double>::infinity();
    key = std::max(key, static_cast<double>(amount) / static_cast<double>(share));
  }
  return key;
}

}  // namespace

double FairShare::dominantShare(size_t queue, const Amounts& allocated) const {
  return dominant(allocated, [&](const std::string& r) { return share(queue, r); });
}

double FairShare::ownDominantShare(size_t queue, const Amounts& own_allocated) const {
  return dominant(own_allocated, [&](const std::string& r) { return ownShare(queue, r); });
}

double decay(double usage, absl::Duration elapsed, absl::Duration half_life) {
  if (half_life <= absl::ZeroDuration() || elapsed <= absl::ZeroDuration()) return usage;
  return usage * std::exp2(-absl::FDivDuration(elapsed, half_life));
}

void accrue(DecayedUsage* usage, const Usage& allocated, absl::Duration elapsed,
            absl::Duration half_life) {
  if (usage->size() < allocated.size()) usage->resize(allocated.size());
  const double seconds = std::max(0.0, absl::ToDoubleSeconds(elapsed));
  for (size_t q = 0; q < usage->size(); ++q) {
    auto& queue = (*usage)[q];
    for (auto& [resource, amount] : queue) amount = decay(amount, elapsed, half_life);
    if (q >= allocated.size()) continue;
    for (const auto& [resource, amount] : allocated[q]) {
      if (amount > 0) queue[resource] += static_cast<double>(amount) * seconds;
    }
  }
}

}  // namespace muster::scheduler::tenancy
