/*
 * sd_notify for Node: one datagram to systemd's notification socket.
 *
 * Node's dgram module has no AF_UNIX datagram sockets, so the daemons'
 * READY=1 / RELOADING=1 / STOPPING=1 / STATUS= / WATCHDOG=1 messages go
 * through this one function. It follows the protocol of sd_notify(3):
 * $NOTIFY_SOCKET is a filesystem path or, when it starts with '@', an
 * abstract socket name (the '@' stands for the leading NUL byte). The
 * sender is identified by systemd through SO_PASSCRED on its side, so the
 * datagram must come from the service's main process (NotifyAccess=main):
 * it is sent from the calling thread of this process, never a helper.
 *
 * Called rarely (state changes, the watchdog at half its interval): a
 * socket is opened and closed per message, nothing is kept.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <node_api.h>

#include "napi_util.h"
#include "addon.h"

/* Room for one message; systemd reads notifications into a buffer of
 * NOTIFY_BUFFER_MAX (PIPE_BUF, 4096 bytes) and drops longer ones. */
#define MESSAGE_MAX 4096

static void throw_errno(napi_env env, const char *what, int err) {
  char text[200];
  snprintf(text, sizeof text, "sd_notify: %s: %s", what, strerror(err));
  napi_throw(env, coded_error(env, "ERR_SD_NOTIFY", text, err, NULL));
}

/*
 * notify(socketPath: string, message: string): undefined
 * Throws ERR_SD_NOTIFY (with .errno) when the address is unusable or the
 * datagram cannot be sent; the caller decides whether that matters.
 */
napi_value sq_sd_notify(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value a[2];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
  char message[MESSAGE_MAX + 1];
  size_t path_len = 0, message_len = 0;
  if (argc != 2 ||
      napi_get_value_string_utf8(env, a[0], path, sizeof path, &path_len) != napi_ok ||
      napi_get_value_string_utf8(env, a[1], message, sizeof message, &message_len) != napi_ok) {
    napi_throw_type_error(env, "ERR_SD_NOTIFY", "sd_notify: notify(socketPath: string, message: string)");
    return NULL;
  }
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  /* A string that filled the buffer was cut: too long for sun_path. */
  if (path_len < 2 || path_len >= sizeof sa.sun_path || (path[0] != '/' && path[0] != '@')) {
    throw_errno(env, "NOTIFY_SOCKET must be an absolute path or an @abstract name shorter than 108 bytes", EINVAL);
    return NULL;
  }
  if (message_len == 0 || message_len >= MESSAGE_MAX) {
    throw_errno(env, "the message must be 1..4095 bytes", EMSGSIZE);
    return NULL;
  }
  memcpy(sa.sun_path, path, path_len);
  socklen_t sa_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + path_len);
  if (path[0] == '@') sa.sun_path[0] = '\0';          /* abstract: exact length, no trailing NUL */
  else sa_len += 1;                                    /* path: include the terminating NUL */

  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    throw_errno(env, "socket(AF_UNIX, SOCK_DGRAM)", errno);
    return NULL;
  }
  ssize_t r;
  do {
    r = sendto(fd, message, message_len, MSG_NOSIGNAL, (struct sockaddr *)&sa, sa_len);
  } while (r < 0 && errno == EINTR);
  int err = r < 0 ? errno : 0;
  close(fd);
  if (err) {
    throw_errno(env, "sendto($NOTIFY_SOCKET)", err);
    return NULL;
  }
  return NULL;
}
