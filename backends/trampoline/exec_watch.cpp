#include "backends/trampoline/exec_watch.h"

#include <sys/socket.h>
#include <unistd.h>

#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>

#include <cstdint>
#include <cstring>

namespace gotap::trampoline {

bool ExecWatch::start(pid_t pid) {
  pid_ = pid;
  sys::Fd fd(::socket(PF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_CONNECTOR));
  if (!fd) return false;
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  addr.nl_groups = CN_IDX_PROC;
  addr.nl_pid = 0;  // the kernel picks a port id
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return false;
  // Every process's events come here, not only the program's: room for a busy system's
  // between two reads.
  const int room = 1 << 20;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &room, sizeof room);
  // The listen request: a netlink header, the connector's header, then the operation, packed
  // in one buffer (cn_msg ends with a flexible array).
  alignas(nlmsghdr) uint8_t msg[NLMSG_SPACE(sizeof(cn_msg) + sizeof(proc_cn_mcast_op))] = {};
  auto* nl = reinterpret_cast<nlmsghdr*>(msg);
  nl->nlmsg_len = NLMSG_LENGTH(sizeof(cn_msg) + sizeof(proc_cn_mcast_op));
  nl->nlmsg_type = NLMSG_DONE;
  nl->nlmsg_pid = static_cast<uint32_t>(getpid());
  auto* cn = static_cast<cn_msg*>(NLMSG_DATA(nl));
  cn->id.idx = CN_IDX_PROC;
  cn->id.val = CN_VAL_PROC;
  cn->len = sizeof(proc_cn_mcast_op);
  const proc_cn_mcast_op op = PROC_CN_MCAST_LISTEN;
  std::memcpy(cn->data, &op, sizeof op);
  if (::send(fd.get(), msg, nl->nlmsg_len, 0) != static_cast<ssize_t>(nl->nlmsg_len)) return false;
  fd_ = std::move(fd);
  return true;
}

bool ExecWatch::saw_exec() {
  if (!fd_ || exec_) return exec_;
  alignas(nlmsghdr) char buf[4096];
  for (;;) {
    const ssize_t got = ::recv(fd_.get(), buf, sizeof buf, 0);
    if (got <= 0) break;  // nothing more now (or the socket's queue overflowed: ENOBUFS)
    int len = static_cast<int>(got);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      const auto* cn = static_cast<const cn_msg*>(NLMSG_DATA(h));
      if (cn->id.idx != CN_IDX_PROC || cn->len < sizeof(proc_event)) continue;
      proc_event ev;
      std::memcpy(&ev, cn->data, sizeof ev);
      if (ev.what == proc_event::PROC_EVENT_EXEC && ev.event_data.exec.process_tgid == pid_)
        exec_ = true;
    }
  }
  return exec_;
}

}  // namespace gotap::trampoline
