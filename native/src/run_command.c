/*
 * runCommand(argv, input, timeoutMs, maxBytes): a child process run
 * entirely on a libuv threadpool thread, never on the event loop.
 *
 * Why: libuv's uv_spawn (child_process.spawn, execFile) forks on the
 * event loop's thread and waits there until the child has exec'd. fork()
 * copies the page tables of the whole process, so the wait grows with the
 * daemon's RSS: measured here (Node 24, `nft --version`), median 1.7 ms at
 * 67 MB, 4.0 ms at 189 MB, 14.3 ms at 492 MB, during which no SYN verdict
 * is given. The front node runs nft and iptables-save periodically (rule
 * check read-backs, schedule and fallback writes) at hundreds of MB with a
 * million flows or 1,000 VIPs.
 *
 * Here the worker thread calls posix_spawnp, which glibc implements with
 * clone(CLONE_VM | CLONE_VFORK): no page tables are copied, and only the
 * worker thread waits for the exec. It then feeds stdin, collects stdout and
 * stderr with poll(2), enforces the timeout (SIGKILL, as execFile's
 * killSignal) and the output bound (SIGKILL, like execFile's maxBuffer), and
 * reaps the child with waitpid on its own pid (libuv reaps only the pids of
 * its own process handles, so it never takes this one).
 *
 * Invariants: the child starts with every signal at its default action and
 * an empty mask (Node ignores SIGPIPE, and an ignored signal and the
 * calling thread's mask survive exec); it inherits no
 * descriptor besides 0, 1 and 2 (closefrom(3) in the file actions, for
 * descriptors someone opened without O_CLOEXEC).
 *
 * Resolves { status, signal, stdout, stderr, timedOut, truncated }: status
 * the exit code (-1 if killed by a signal), signal the signal number (0 if
 * none). Rejects with ERR_SLUICE_SPAWN (errno, syscall) when the child
 * could not be started (ENOENT: no such program) or a pipe not made.
 */
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "napi_util.h"

extern char **environ;

#define MAX_ARGS 256

typedef struct {
  char *data;
  size_t len, cap;
} buf_t;

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  char *argv[MAX_ARGS + 1];
  char *input;
  size_t input_len;
  uint32_t timeout_ms;
  size_t max_bytes;
  /* results */
  int err;
  const char *syscall;
  int status, signal, timed_out, truncated;
  buf_t out, errb;
} cmd_job;

static void job_free(cmd_job *j) {
  for (int i = 0; j->argv[i] != NULL; i++) free(j->argv[i]);
  free(j->input);
  free(j->out.data);
  free(j->errb.data);
  free(j);
}

static uint64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* Appends what fd has now; 0 at EOF, 1 if more may come, -1 when the bound is passed. */
static int drain(int fd, buf_t *b, size_t total_cap, size_t *total) {
  char chunk[65536];
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n == 0) return 0;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return 1;
      return 0; /* a read error ends this stream like EOF */
    }
    if (*total + (size_t)n > total_cap) return -1;
    if (b->len + (size_t)n > b->cap) {
      size_t cap = b->cap == 0 ? 65536 : b->cap;
      while (cap < b->len + (size_t)n) cap *= 2;
      char *d = realloc(b->data, cap);
      if (d == NULL) return -1;
      b->data = d;
      b->cap = cap;
    }
    memcpy(b->data + b->len, chunk, (size_t)n);
    b->len += (size_t)n;
    *total += (size_t)n;
  }
}

static void run(cmd_job *j) {
  int in[2] = { -1, -1 }, out[2] = { -1, -1 }, er[2] = { -1, -1 };
  if ((j->input != NULL && pipe2(in, O_CLOEXEC) != 0) || pipe2(out, O_CLOEXEC) != 0 || pipe2(er, O_CLOEXEC) != 0) {
    j->err = errno;
    j->syscall = "pipe2";
    goto close_all;
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  if (j->input != NULL) posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  else posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, er[1], 2);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid;
  int rc = posix_spawnp(&pid, j->argv[0], &fa, &attr, j->argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    j->err = rc;
    j->syscall = "posix_spawnp";
    goto close_all;
  }
  /* The child's ends are its own now. */
  if (in[0] >= 0) close(in[0]);
  close(out[1]);
  close(er[1]);
  in[0] = out[1] = er[1] = -1;
  if (in[1] >= 0) fcntl(in[1], F_SETFL, O_NONBLOCK);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(er[0], F_SETFL, O_NONBLOCK);

  size_t written = 0, total = 0;
  int out_open = 1, err_open = 1;
  uint64_t deadline = now_ms() + j->timeout_ms;
  if (in[1] >= 0 && j->input_len == 0) {
    close(in[1]);
    in[1] = -1;
  }
  while (out_open || err_open) {
    struct pollfd p[3];
    int n = 0, io = -1, oo = -1, eo = -1;
    if (in[1] >= 0) { io = n; p[n++] = (struct pollfd){ .fd = in[1], .events = POLLOUT }; }
    if (out_open) { oo = n; p[n++] = (struct pollfd){ .fd = out[0], .events = POLLIN }; }
    if (err_open) { eo = n; p[n++] = (struct pollfd){ .fd = er[0], .events = POLLIN }; }
    uint64_t t = now_ms();
    if (t >= deadline) {
      j->timed_out = 1;
      break;
    }
    int r = poll(p, (nfds_t)n, (int)(deadline - t));
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (io >= 0 && p[io].revents != 0) {
      ssize_t w = write(in[1], j->input + written, j->input_len - written);
      if (w > 0) written += (size_t)w;
      /* EPIPE (the child closed its stdin) or all written: no more input. */
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == j->input_len) {
        close(in[1]);
        in[1] = -1;
      }
    }
    int d = 1;
    if (oo >= 0 && p[oo].revents != 0) {
      d = drain(out[0], &j->out, j->max_bytes, &total);
      if (d == 0) out_open = 0;
    }
    if (d >= 0 && eo >= 0 && p[eo].revents != 0) {
      d = drain(er[0], &j->errb, j->max_bytes, &total);
      if (d == 0) err_open = 0;
    }
    if (d < 0) {
      j->truncated = 1;
      break;
    }
  }
  if (j->timed_out || j->truncated) kill(pid, SIGKILL);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st)) {
    j->status = WEXITSTATUS(st);
  } else {
    j->status = -1;
    j->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  }
close_all:
  for (int i = 0; i < 2; i++) {
    if (in[i] >= 0) close(in[i]);
    if (out[i] >= 0) close(out[i]);
    if (er[i] >= 0) close(er[i]);
  }
}

static void execute(napi_env env, void *data) {
  (void)env;
  run(data);
}

static napi_value buffer_of(napi_env env, const buf_t *b) {
  napi_value v;
  void *dst;
  napi_create_buffer(env, b->len, &dst, &v);
  if (b->len > 0) memcpy(dst, b->data, b->len);
  return v;
}

static void complete(napi_env env, napi_status status, void *data) {
  cmd_job *j = data;
  if (status != napi_ok) {
    napi_reject_deferred(env, j->deferred, coded_error(env, "ERR_SLUICE_SPAWN", "the command was cancelled", 0, NULL));
  } else if (j->err != 0) {
    char msg[160];
    snprintf(msg, sizeof msg, "cannot run %s", j->argv[0]);
    napi_reject_deferred(env, j->deferred, coded_error_errno(env, "ERR_SLUICE_SPAWN", msg, j->err, j->syscall));
  } else {
    napi_value o, b;
    napi_create_object(env, &o);
    set_number(env, o, "status", j->status);
    set_number(env, o, "signal", j->signal);
    napi_set_named_property(env, o, "stdout", buffer_of(env, &j->out));
    napi_set_named_property(env, o, "stderr", buffer_of(env, &j->errb));
    napi_get_boolean(env, j->timed_out != 0, &b);
    napi_set_named_property(env, o, "timedOut", b);
    napi_get_boolean(env, j->truncated != 0, &b);
    napi_set_named_property(env, o, "truncated", b);
    napi_resolve_deferred(env, j->deferred, o);
  }
  napi_delete_async_work(env, j->work);
  job_free(j);
}

/* A JS string as a malloc'd C string, or NULL (not a string, or an embedded NUL). */
static char *c_string(napi_env env, napi_value v) {
  size_t len;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok) return NULL;
  char *s = malloc(len + 1);
  if (s == NULL) return NULL;
  napi_get_value_string_utf8(env, v, s, len + 1, &len);
  if (strlen(s) != len) {
    free(s);
    return NULL;
  }
  return s;
}

static napi_value run_command(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value a[4];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  cmd_job *j = calloc(1, sizeof *j);
  if (j == NULL) {
    throw_coded(env, "ERR_SLUICE_NATIVE_ARG", "out of memory", 0, NULL);
    return NULL;
  }
  int good = argc == 4;
  uint32_t n = 0;
  bool is_array = false;
  if (good) good = napi_is_array(env, a[0], &is_array) == napi_ok && is_array && napi_get_array_length(env, a[0], &n) == napi_ok && n >= 1 && n <= MAX_ARGS;
  for (uint32_t i = 0; good && i < n; i++) {
    napi_value e;
    good = napi_get_element(env, a[0], i, &e) == napi_ok && (j->argv[i] = c_string(env, e)) != NULL;
  }
  napi_valuetype t;
  if (good && napi_typeof(env, a[1], &t) == napi_ok && t != napi_null && t != napi_undefined) {
    void *data;
    size_t len;
    bool is_buf = false;
    good = napi_is_buffer(env, a[1], &is_buf) == napi_ok && is_buf && napi_get_buffer_info(env, a[1], &data, &len) == napi_ok;
    if (good) {
      j->input = malloc(len > 0 ? len : 1);
      good = j->input != NULL;
      if (good && len > 0) memcpy(j->input, data, len);
      j->input_len = len;
    }
  }
  uint32_t timeout = 0, max_mb = 0;
  good = good && get_u32(env, a[2], &timeout) && timeout > 0 && get_u32(env, a[3], &max_mb) && max_mb >= 1 && max_mb <= 4096;
  if (!good) {
    job_free(j);
    throw_coded(env, "ERR_SLUICE_NATIVE_ARG", "runCommand(argv: 1..256 strings, input: Buffer | null, timeoutMs > 0, maxMiB 1..4096)", 0, NULL);
    return NULL;
  }
  j->timeout_ms = timeout;
  j->max_bytes = (size_t)max_mb << 20;
  int started;
  napi_value promise = queue_promise_work(env, "sluice.runCommand", execute, complete, j, &j->deferred, &j->work, "ERR_SLUICE_SPAWN", "the command", &started);
  if (!started) job_free(j);
  return promise;
}

void run_command_register(napi_env env, napi_value exports) {
  napi_property_descriptor p[] = {
    { "runCommand", NULL, run_command, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof p / sizeof p[0], p);
}
