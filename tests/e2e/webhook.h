#pragma once

// A validating admission webhook for pods/binding, served on a loopback HTTPS port and registered
// with the real API server for as long as the object lives. Each binding the API server is asked
// to make (by muster-scheduler or anyone) is first shown to `decide`, which can let it through,
// refuse it with any HTTP code (403, 500, ...), or act on the cluster before answering (delete the
// pod, bind it elsewhere): the refusals a scheduler meets in production, made on demand.
//
// The serving certificate is the test cluster's apiserver certificate (127.0.0.1, signed by the
// cluster CA), and the CA goes into the configuration's caBundle, so the API server verifies it.
// `decide` runs on the webhook's own threads, several at once; it may call the API server
// (including bindings, which come back through the webhook).

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "proto/client.h"

namespace muster::e2e {

class BindingWebhook {
 public:
  struct Review {
    std::string pod_namespace, pod, node;
  };
  struct Decision {
    bool allowed = true;
    int code = 0;  // HTTP status the API server answers with when refused
    std::string message;
  };
  using Decide = std::function<Decision(const Review&)>;

  // Serves, registers, and returns once the API server has called it (a probe binding).
  BindingWebhook(proto::Client& client, Decide decide);
  // Unregisters, then stops serving.
  ~BindingWebhook();
  BindingWebhook(const BindingWebhook&) = delete;
  BindingWebhook& operator=(const BindingWebhook&) = delete;

  // Every binding reviewed so far (probes excluded), in arrival order.
  std::vector<Review> reviews() const;
  // How many of them were for `pod` ("name" in any namespace).
  int reviewsOf(const std::string& pod) const;

  static Decision allow() { return {}; }
  static Decision refuse(int code, std::string message) { return {false, code, std::move(message)}; }

 private:
  // Asks the API server to bind the probe pod; true when that reached this webhook.
  bool probe();

  struct Impl;
  std::shared_ptr<Impl> impl_;
  proto::Client& client_;
  std::string name_;
};

}  // namespace muster::e2e
