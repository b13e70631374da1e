/*
 * readFull(fd, buffer, offset, length): read(2) repeated on a libuv
 * threadpool thread until `length` bytes are in buffer[offset..] or the
 * file ends; resolves the number of bytes read (0: end of file).
 *
 * Why: /proc/net/nf_conntrack is a seq_file, and a seq_file read returns at
 * most one page of text (~4 KiB, ~25 flows) whatever the size asked for
 * (measured here: 4,040-4,048 bytes per 64 KiB read). Through
 * fs.FileHandle.read each page is one threadpool round trip and one
 * event-loop turn: the front node's resync of a million flows (~170 MB of
 * text) took ~42,000 of them, each waking a worker and then the loop
 * thread. Here one round trip fills the whole chunk.
 *
 * For regular and proc files (a read that returns 0 is the end); never a
 * pipe or socket, where a read may wait. Reads at the descriptor's current
 * position, so two calls on one descriptor must not overlap (the caller
 * awaits each). The buffer is held by a reference until the read completes.
 * Rejects with ERR_SLUICE_READ (errno, syscall "read") on a failed read; the
 * bytes read before it are lost with the chunk, as with a failed read(2).
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include "napi_util.h"

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  napi_ref buffer;
  int fd;
  char *dst;
  size_t want, got;
  int err;
} read_job;

static void execute(napi_env env, void *data) {
  (void)env;
  read_job *j = data;
  while (j->got < j->want) {
    ssize_t n = read(j->fd, j->dst + j->got, j->want - j->got);
    if (n < 0) {
      if (errno == EINTR) continue;
      j->err = errno;
      return;
    }
    if (n == 0) return; /* end of file */
    j->got += (size_t)n;
  }
}

static void complete(napi_env env, napi_status status, void *data) {
  read_job *j = data;
  if (status != napi_ok) {
    napi_reject_deferred(env, j->deferred, coded_error(env, "ERR_SLUICE_READ", "the read was cancelled", 0, NULL));
  } else if (j->err != 0) {
    napi_reject_deferred(env, j->deferred, coded_error_errno(env, "ERR_SLUICE_READ", "cannot read", j->err, "read"));
  } else {
    napi_value n;
    napi_create_double(env, (double)j->got, &n);
    napi_resolve_deferred(env, j->deferred, n);
  }
  napi_delete_reference(env, j->buffer);
  napi_delete_async_work(env, j->work);
  free(j);
}

static napi_value read_full(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value a[4];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  uint32_t fd = 0, offset = 0, length = 0;
  bool is_buf = false;
  void *data = NULL;
  size_t len = 0;
  int good = argc == 4 && get_u32(env, a[0], &fd) && fd <= 0x7fffffff && napi_is_buffer(env, a[1], &is_buf) == napi_ok && is_buf &&
             napi_get_buffer_info(env, a[1], &data, &len) == napi_ok && get_u32(env, a[2], &offset) && get_u32(env, a[3], &length) &&
             length >= 1 && (size_t)offset <= len && (size_t)length <= len - offset;
  if (!good) {
    throw_coded(env, "ERR_SLUICE_NATIVE_ARG", "readFull(fd, buffer: Buffer, offset, length >= 1) with offset + length within the buffer", 0, NULL);
    return NULL;
  }
  read_job *j = calloc(1, sizeof *j);
  if (j == NULL) {
    throw_coded(env, "ERR_SLUICE_NATIVE_ARG", "out of memory", 0, NULL);
    return NULL;
  }
  j->fd = (int)fd;
  j->dst = (char *)data + offset;
  j->want = length;
  if (napi_create_reference(env, a[1], 1, &j->buffer) != napi_ok) {
    free(j);
    throw_coded(env, "ERR_SLUICE_NATIVE_ARG", "cannot hold the buffer", 0, NULL);
    return NULL;
  }
  int started;
  napi_value promise = queue_promise_work(env, "sluice.readFull", execute, complete, j, &j->deferred, &j->work, "ERR_SLUICE_READ", "the read", &started);
  if (!started) {
    napi_delete_reference(env, j->buffer);
    free(j);
  }
  return promise;
}

void read_full_register(napi_env env, napi_value exports) {
  napi_property_descriptor p[] = {
    { "readFull", NULL, read_full, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof p / sizeof p[0], p);
}
