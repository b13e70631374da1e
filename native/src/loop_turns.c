/*
 * The CPU time of each event-loop turn, for telling the daemon's own stalls
 * from the scheduler's. A loop-delay sampler (nodejs_eventloop_lag_*) reads
 * wall-clock lateness: on a machine whose cores are shared with busier
 * processes it includes the time the thread waited to be scheduled, which no
 * change in the daemon can remove. A uv_prepare handle runs once per turn,
 * just before the loop blocks in epoll; the thread's CPU clock
 * (CLOCK_THREAD_CPUTIME_ID, which does not advance while the thread blocks
 * or waits for a CPU) read there gives the CPU time of the whole turn since
 * the last one: every I/O callback, timer and microtask it ran.
 *
 * The stats array (Float64Array, LT_WORDS) is written here and read by
 * JavaScript without a call: LT_MAX_NS is the longest turn since JavaScript
 * last wrote 0 there (the metric's collect, at scrape time), LT_TURNS the
 * turns counted, LT_CPU_NS the thread's CPU time at the last turn.
 * One per process: the front node's main thread.
 */
#include <time.h>
#include <uv.h>
#include "napi_util.h"

enum { LT_MAX_NS, LT_TURNS, LT_CPU_NS, LT_WORDS };

static struct {
  uv_prepare_t prepare;
  int running;
  double *stats;
  napi_ref stats_ref;
  double last;
} lt;

static double thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void on_prepare(uv_prepare_t *h) {
  (void)h;
  double now = thread_cpu_ns();
  double turn = now - lt.last;
  lt.last = now;
  if (turn > lt.stats[LT_MAX_NS]) lt.stats[LT_MAX_NS] = turn;
  lt.stats[LT_TURNS] += 1;
  lt.stats[LT_CPU_NS] = now;
}

/* loopTurnsStart(stats: Float64Array of LT_WORDS): starts measuring (the
 * handle does not keep the loop alive); throws if already started. */
static napi_value lt_start(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  void *data;
  size_t len;
  if (argc != 1 || !get_typed(env, a[0], napi_float64_array, &data, &len) || len < LT_WORDS) {
    napi_throw(env, coded_error(env, "ERR_SLUICE_NATIVE_ARG", "loopTurnsStart(stats: Float64Array(3))", 0, NULL));
    return NULL;
  }
  if (lt.running) {
    napi_throw(env, coded_error(env, "ERR_SLUICE_NATIVE_ARG", "loopTurnsStart: already started", 0, NULL));
    return NULL;
  }
  uv_loop_t *loop;
  napi_get_uv_event_loop(env, &loop);
  int ue = uv_prepare_init(loop, &lt.prepare);
  if (ue == 0) ue = uv_prepare_start(&lt.prepare, on_prepare);
  if (ue != 0) {
    napi_throw(env, coded_error(env, "ERR_SLUICE_NATIVE_ARG", "loopTurnsStart: uv_prepare", -ue, "uv_prepare_start"));
    return NULL;
  }
  uv_unref((uv_handle_t *)&lt.prepare);
  napi_create_reference(env, a[0], 1, &lt.stats_ref);
  lt.stats = data;
  lt.last = thread_cpu_ns();
  lt.running = 1;
  return NULL;
}

void loop_turns_register(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    { "loopTurnsStart", NULL, lt_start, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  set_number(env, exports, "LOOP_TURN_WORDS", LT_WORDS);
}
