# nvme-poll — case 3's NVMe with polling: 4 CPUs on one node, an NVMe with 4 I/O queue
# pairs of which `nvme.poll_queues=2` (kernel command line) become poll queues, so io_uring
# `hipri` I/O completes without interrupts and the queue's io_poll is 1.
LAB_DESCRIPTION="4 CPUs, one node; NVMe with 4 queue pairs, 2 of them poll queues"
LAB_SMP="4,sockets=1,cores=4,threads=1"
LAB_NODES=()
LAB_MODULES="nvme"
LAB_CMDLINE="nvme.poll_queues=2"
lab_devices() {
  lab_args -drive "file=$(lab_disk nvme0 64M),if=none,id=nv0,format=raw" \
    -device nvme,serial=lab-nvme-poll,max_ioqpairs=4,drive=nv0
}
