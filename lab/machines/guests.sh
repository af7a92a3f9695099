# guests — case 4's many guests: LAB_GUESTS (default 3) small guests, 1 CPU each, each
# running `fio --server` forwarded from 127.0.0.1:(LAB_PORT_BASE+I). The command runs on THIS
# machine once every server answers, with LAB_FIO_SERVERS set to the `host,port` list that
# a hosts-mode experiment or `fio --client` takes. Each guest has a scratch virtio disk
# (/dev/vda in the guest) for fio to use.
LAB_DESCRIPTION="\${LAB_GUESTS:-3} guests of 1 CPU, each running fio --server, forwarded from 127.0.0.1:\$((LAB_PORT_BASE+I))"
LAB_SMP="1"
LAB_NODES=()
LAB_MODULES="virtio_net virtio_blk"
LAB_HOST_COMMAND=1
LAB_INSTANCES="${LAB_GUESTS:-3}"
lab_devices() {
  # LAB_INSTANCE is set per guest by scripts/lab.
  lab_args -netdev "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$((LAB_PORT_BASE + LAB_INSTANCE))-10.0.2.15:8765" \
    -device virtio-net-pci,netdev=n0
  lab_args -drive "file=$(lab_disk "vd$LAB_INSTANCE" 64M),if=none,id=vd0,format=raw" \
    -device virtio-blk-pci,drive=vd0,serial=lab-guest$LAB_INSTANCE
}
LAB_GUEST_SETUP='
for d in /sys/class/net/*; do
  n=${d##*/}; [ "$n" = lo ] && continue
  ip addr add 10.0.2.15/24 dev $n; ip link set $n up
done
ip link set lo up'
LAB_GUEST_COMMAND='exec fio --server=0.0.0.0,8765'
