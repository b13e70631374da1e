/* Netlink pieces shared by the NFQUEUE and NFLOG bindings (see nl_util.h). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <linux/netlink.h>

#include "nl_util.h"

struct mnl_socket *nl_open(uint32_t rcvbuf, int *err, const char **syscall) {
  struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (!nl) {
    *err = errno;
    *syscall = "socket";
    return NULL;
  }
  if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
    *err = errno;
    *syscall = "bind";
    mnl_socket_close(nl);
    return NULL;
  }
  if (rcvbuf > 0) {
    /* SO_RCVBUFFORCE ignores net.core.rmem_max but needs CAP_NET_ADMIN,
     * which we have if we can bind a queue or group at all; fall back
     * otherwise. */
    int fd = mnl_socket_get_fd(nl);
    int v = (int)rcvbuf;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof v) < 0)
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
  }
  return nl;
}

int nl_config_and_ack(struct mnl_socket *nl, uint32_t portid, struct nlmsghdr *nlh) {
  static uint32_t seq_counter = 0;
  nlh->nlmsg_flags |= NLM_F_ACK;
  nlh->nlmsg_seq = ++seq_counter;
  if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) return errno;
  char buf[8192];
  struct pollfd pfd = { mnl_socket_get_fd(nl), POLLIN, 0 };
  for (;;) {
    int pr = poll(&pfd, 1, 2000);
    if (pr == 0) return ETIMEDOUT;
    if (pr < 0) { if (errno == EINTR) continue; return errno; }
    ssize_t r = recv(pfd.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r < 0) { if (errno == EAGAIN || errno == EINTR) continue; return errno; }
    if (mnl_cb_run(buf, (size_t)r, nlh->nlmsg_seq, portid, NULL, NULL) == MNL_CB_ERROR) return errno;
    return 0;
  }
}

int proc_lists(const char *path, unsigned num) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  unsigned n;
  char line[256];
  int found = 0;
  while (!found && fgets(line, sizeof line, f))
    if (sscanf(line, "%u", &n) == 1 && n == num) found = 1;
  fclose(f);
  return found;
}
