#pragma once

// A small Prometheus client: counters, gauges and histograms with labels, rendered in the text
// exposition format (version 0.0.4). Thread-safe: values are atomics, families lock only to add
// a new label combination. Names follow kube-scheduler's where one exists.

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace muster::metrics {

class Counter {
 public:
  void inc(double v = 1) { add(v); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  void add(double v);
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double v);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  const std::vector<double>& bounds() const { return bounds_; }
  // Cumulative count of observations <= bounds()[i].
  uint64_t cumulative(size_t i) const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

// Exponential bucket bounds: start, start*factor, ... (count of them).
std::vector<double> exponentialBuckets(double start, double factor, int count);

template <class M>
class Family {
 public:
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> bounds = {})
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)),
        bounds_(std::move(bounds)) {}

  // The metric for these label values (in label_names order); created on first use. The
  // reference stays valid for the family's lifetime.
  M& with(const std::vector<std::string>& values = {});

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& labelNames() const { return label_names_; }
  // Snapshot of (label values, metric) pairs for rendering.
  std::vector<std::pair<std::vector<std::string>, const M*>> children() const;

 private:
  std::string name_, help_;
  std::vector<std::string> label_names_;
  std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<M>> children_ ABSL_GUARDED_BY(mu_);
};

class Registry {
 public:
  Family<Counter>& counter(const std::string& name, const std::string& help,
                           std::vector<std::string> labels = {});
  Family<Gauge>& gauge(const std::string& name, const std::string& help,
                       std::vector<std::string> labels = {});
  Family<Histogram>& histogram(const std::string& name, const std::string& help,
                               std::vector<double> bounds, std::vector<std::string> labels = {});
  // The text exposition format.
  std::string render() const;

 private:
  mutable absl::Mutex mu_;
  std::deque<std::unique_ptr<Family<Counter>>> counters_ ABSL_GUARDED_BY(mu_);
  std::deque<std::unique_ptr<Family<Gauge>>> gauges_ ABSL_GUARDED_BY(mu_);
  std::deque<std::unique_ptr<Family<Histogram>>> histograms_ ABSL_GUARDED_BY(mu_);
};

// The process-wide registry served on /metrics.
Registry& defaultRegistry();

// muster_api_write_errors_total{kind}: writes the API server refused (kind "event", "status").
Counter& apiWriteErrors(const std::string& kind);

}  // namespace muster::metrics
