/*
 * Steers a SO_REUSEPORT group of UDP sockets by the client's address prefix
 * (SO_ATTACH_REUSEPORT_CBPF): `sluice dns` with several workers limits
 * responses per client prefix (RRL), and each worker keeps its own buckets,
 * so every datagram of one prefix must reach the same worker. The kernel's
 * default picks a socket by a hash of the 4-tuple, which spreads one
 * prefix's source ports over all workers (each would then allow the full
 * rate: N times the limit).
 *
 * The program returns an index into the group's socket array (the order in
 * which sockets joined; a socket that leaves is replaced in its slot by the
 * last one). An index >= the group's size makes the kernel fall back to its
 * 4-tuple hash: that happens only while a dead worker's replacement is not
 * yet bound. One program serves the whole group; attaching it again (each
 * worker does, so a replacement works alone) replaces it with the same one.
 *
 * The hash: the source address masked to `bits` (IPv4: up to 32; IPv6: the
 * first 64 bits at most), multiplied by a 32-bit odd constant (Fibonacci
 * hashing), the high 16 bits kept, modulo the group size.
 */
#include <errno.h>
#include <linux/filter.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include "napi_util.h"

#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif

#define FIB32 0x9E3779B1u

static uint32_t mask_of(uint32_t bits) { return bits == 0 ? 0 : bits >= 32 ? 0xFFFFFFFFu : ~0u << (32 - bits); }

/* steerReuseportByPrefix(fd, family 4|6, groupSize, bits) */
static napi_value steer_by_prefix(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value a[4];
  uint32_t fd, family, n, bits;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc != 4 || !get_u32(env, a[0], &fd) || !get_u32(env, a[1], &family) || !get_u32(env, a[2], &n) || !get_u32(env, a[3], &bits) ||
      (family != 4 && family != 6) || n < 1 || n > 65536 || bits > (family == 4 ? 32u : 64u)) {
    throw_coded(env, "ERR_SLUICE_NATIVE_ARG", "steerReuseportByPrefix(fd, family 4|6, groupSize 1..65536, bits <= 32 (IPv4) or 64 (IPv6))", 0, NULL);
    return NULL;
  }
  struct sock_filter code[16];
  unsigned short len = 0;
  if (family == 4) {
    code[len++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_NET_OFF + 12));
    code[len++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, mask_of(bits));
  } else {
    uint32_t hi = bits >= 32 ? 32 : bits, lo = bits > 32 ? bits - 32 : 0;
    code[len++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_NET_OFF + 8));
    code[len++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, mask_of(hi));
    code[len++] = (struct sock_filter)BPF_STMT(BPF_ST, 0);
    code[len++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_NET_OFF + 12));
    code[len++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, mask_of(lo));
    code[len++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_MUL | BPF_K, FIB32);
    code[len++] = (struct sock_filter)BPF_STMT(BPF_LDX | BPF_MEM, 0);
    code[len++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0);
  }
  code[len++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_MUL | BPF_K, FIB32);
  code[len++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 16);
  code[len++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, n);
  code[len++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_A, 0);
  struct sock_fprog prog = { .len = len, .filter = code };
  if (setsockopt((int)fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog) != 0) {
    int e = errno;
    char text[160];
    snprintf(text, sizeof text, "SO_ATTACH_REUSEPORT_CBPF on fd %u: %s", fd, strerror(e));
    throw_coded(env, "ERR_SLUICE_REUSEPORT", text, e, "setsockopt");
  }
  return NULL;
}

void reuseport_register(napi_env env, napi_value exports) {
  napi_property_descriptor p = { "steerReuseportByPrefix", NULL, steer_by_prefix, NULL, NULL, NULL, napi_default, NULL };
  napi_define_properties(env, exports, 1, &p);
}
