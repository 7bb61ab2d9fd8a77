// The child's side of process isolation: map the host's sealed plugin image, create, then
// answer one request at a time.
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/chaos_plant.hpp"
#include "isolation/isolation.hpp"
#include "ops/crash_handler.hpp"

namespace sqlstreams::isolation {
namespace {

int protocol_error(const std::string& what) {
  std::fprintf(stderr, "sqlstreams __handler-child: %s\n", what.c_str());
  return 2;
}

}  // namespace

int run_handler_child(int fd, pid_t parent, int image_fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) return 1;  // the host is already gone
  // Nothing of the host but the channel and stdio: close inherited fds (database sockets...).
  ::syscall(SYS_close_range, static_cast<unsigned>(std::max(fd, image_fd)) + 1, ~0U, 0);
  Channel channel(fd, kMaxFrameToChild);
  std::unique_ptr<plugin_host::PluginRegistry> registry;  // outlives the instance
  std::unique_ptr<plugin_host::HandlerInstance> instance;
  try {
    auto first = channel.receive();
    if (!first) return 0;  // the host went away before asking anything
    const auto* init = std::get_if<InitFrame>(&*first);
    if (init == nullptr) return protocol_error("the first frame is not an init frame");
    try {
      registry = std::make_unique<plugin_host::PluginRegistry>(init->plugin_dir);
      // The host's sealed image, never the file on disk
      // (runtime/isolation/README.md#the-supervisor).
      if (!init->image_sha256.empty()) {
        if (image_fd < 0) {
          throw plugin_host::PluginLoadError(
              init->plugin, "", "the host's sealed plugin image (--image-fd)",
              "a handler process started without it", "start handler processes through a host");
        }
        registry->adopt_image(init->plugin, image_fd, init->image_sha256);
      }
      instance = registry->create(init->plugin, init->handler, init->config_json, init->stream,
                                  init->group);
    } catch (const plugin_host::PluginLoadError& e) {
      (void)channel.send(FailedFrame{e.path(), e.symbol(), e.expected(), e.found(), e.hint()});
      return 3;
    } catch (const std::exception& e) {
      (void)channel.send(
          FailedFrame{init->plugin, "handler process", "a created handler", e.what(), ""});
      return 3;
    }
    ops::rearm_exit_hook();  // newer than the statics the plugin just made
    if (!channel.send(ReadyFrame{instance->plugin_name(), instance->concurrent()})) return 0;
    // Test builds: the previous OK reply's outputs, sent again (chaos plant).
    const bool plant_repeat = chaos_plant("isolated-outputs-repeated");
    std::vector<OutputFrame> previous;
    for (;;) {
      auto frame = channel.receive();
      if (!frame) break;  // the host closed the channel: stop
      if (const auto* policy = std::get_if<EmitPolicyFrame>(&*frame)) {
        // The group emits (docs/operating/emits.md): each call's outputs are checked here, as
        // they are in a host, and travel back in the reply.
        auto p = std::make_shared<plugin_host::EmitPolicy>();
        for (const auto& [stream, max] : policy->max_payload_bytes) {
          p->max_payload_bytes.emplace(stream, max);
        }
        p->max_count = static_cast<size_t>(policy->max_count);
        p->max_bytes = policy->max_bytes;
        instance->set_emit_policy(std::move(p));
        continue;
      }
      const auto* request = std::get_if<RequestFrame>(&*frame);
      if (request == nullptr) return protocol_error("expected a request frame");
      plugin_host::MessageView view;
      view.id = request->id;
      view.stream = request->stream;
      view.group = request->group;
      view.payload = request->payload;
      view.schema_version = request->schema_version;
      view.attempt = request->attempt;
      view.created_at_unix_ms = request->created_at_unix_ms;
      if (request->message_key) view.message_key = *request->message_key;
      const plugin_host::Outcome out = instance->handle(view);
      ReplyFrame reply{
          request->seq, static_cast<uint8_t>(out.kind), out.delay.count(), out.error, {}};
      if (out.kind == plugin_host::OutcomeKind::kOk) {
        for (auto& o : out.outputs) {
          reply.outputs.push_back(OutputFrame{std::move(o.stream), std::move(o.payload),
                                              o.schema_version, std::move(o.key),
                                              std::move(o.idempotency_key)});
        }
        if (plant_repeat) {
          const auto fresh = reply.outputs;
          reply.outputs.insert(reply.outputs.end(), previous.begin(), previous.end());
          previous = fresh;
        }
      }
      if (!channel.send(reply)) break;
    }
  } catch (const FrameError& e) {
    return protocol_error(e.what());
  }
  instance.reset();
  return 0;
}

}  // namespace sqlstreams::isolation
