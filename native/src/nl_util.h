/* Netlink pieces shared by the NFQUEUE (nfq.c) and NFLOG (nflog.c) bindings:
 * both talk to nfnetlink over one socket of their own, configure it with one
 * acknowledged message, and tell "bound elsewhere" from "no permission" by
 * reading the same kind of /proc list. */
#ifndef SLUICE_NL_UTIL_H
#define SLUICE_NL_UTIL_H
#include <stdint.h>
#include <libmnl/libmnl.h>

/* A non-blocking NETLINK_NETFILTER socket bound to an automatic port id,
 * with SO_RCVBUF raised to rcvbuf bytes when rcvbuf > 0. On failure: NULL,
 * *err = the errno, *syscall = "socket" or "bind". */
struct mnl_socket *nl_open(uint32_t rcvbuf, int *err, const char **syscall);

/* Sends one config message with NLM_F_ACK and waits (up to 2 s) for its
 * ack. Returns 0 or a positive errno. The ack is queued while the kernel
 * handles our sendto(), before any packet or record of a freshly bound
 * queue or group, so it is the first thing read. */
int nl_config_and_ack(struct mnl_socket *nl, uint32_t portid, struct nlmsghdr *nlh);

/* 1 if the /proc/net/netfilter list at `path` (nfnetlink_queue or
 * nfnetlink_log, per namespace) has a line for number `num`: that queue or
 * group is bound. Kernel quirk: binding one that another socket owns fails
 * with EPERM (peer_portid mismatch), like a missing CAP_NET_ADMIN; this
 * tells the two apart. */
int proc_lists(const char *path, unsigned num);
#endif
