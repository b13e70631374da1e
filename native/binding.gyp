{
  "targets": [
    {
      "target_name": "sluice_nfq",
      "sources": ["src/nfq.c", "src/nflog.c", "src/ctevents.c", "src/napi_util.c", "src/nl_reader.c", "src/sd_notify.c", "src/reuseport.c", "src/udp_batch.c", "src/loop_turns.c", "src/nft_netlink.c", "src/run_command.c", "src/read_full.c", "src/ct_dump.c", "src/ct_msg.c", "src/ct_expire.c"],
      "defines": ["NAPI_VERSION=8", "_GNU_SOURCE"],
      "cflags_c": ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter"],
      "libraries": ["-lnetfilter_queue", "-lmnl", "-lsystemd"]
    }
  ]
}
