/*
 * sd_notify for Node (whose dgram has no AF_UNIX datagram sockets) through
 * libsystemd's sd_notify(3): it sends to $NOTIFY_SOCKET (a path, or '@' for
 * an abstract name) and refuses anything else. systemd identifies the
 * sender by SO_PASSCRED: with NotifyAccess=main the datagram must come from
 * the main process, so it is sent from the calling thread, never a helper.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include "napi_util.h"

/* systemd reads notifications into NOTIFY_BUFFER_MAX (4096) bytes and drops longer ones. */
#define MESSAGE_MAX 4096
#define PATH_MAX_ 108 /* sizeof sun_path */

/* notify(socketPath: string, message: string): undefined; throws ERR_SD_NOTIFY
 * (with .errno) if the address is unusable or the datagram cannot be sent. */
napi_value sq_sd_notify(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value a[2];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  char path[PATH_MAX_ + 1];
  char message[MESSAGE_MAX + 1];
  size_t path_len = 0, message_len = 0;
  if (argc != 2 ||
      napi_get_value_string_utf8(env, a[0], path, sizeof path, &path_len) != napi_ok ||
      napi_get_value_string_utf8(env, a[1], message, sizeof message, &message_len) != napi_ok) {
    napi_throw_type_error(env, "ERR_SD_NOTIFY", "sd_notify: notify(socketPath: string, message: string)");
    return NULL;
  }
  /* A string that filled its buffer was cut: too long. */
  int r;
  if (path_len >= PATH_MAX_) r = -EINVAL;
  else if (message_len == 0 || message_len >= MESSAGE_MAX) r = -EMSGSIZE;
  else if (setenv("NOTIFY_SOCKET", path, 1) < 0) r = -errno;
  else r = sd_notify(0, message); /* reads $NOTIFY_SOCKET; < 0 is -errno */
  if (r < 0) {
    char text[200];
    snprintf(text, sizeof text, "sd_notify(%s): %s", path, strerror(-r));
    napi_throw(env, coded_error(env, "ERR_SD_NOTIFY", text, -r, NULL));
  }
  return NULL;
}
