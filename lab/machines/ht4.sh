# ht4 — case 2's box: 4 packages of 1 core x 2 threads (one node), four virtio-net NICs
# whose queue interrupts can be moved. Each NIC has its own user-net subnet 10.0.(10+K).0/24
# (guest address .15) and a port forward 127.0.0.1:(LAB_PORT_BASE+K) -> guest port 8000, so
# traffic driven from this machine arrives on NIC K. The guest set-up gives each NIC its
# address; a test starts `python3 -m http.server 8000` in the guest and downloads from here.
LAB_DESCRIPTION="4 packages x 2 threads; 4 virtio-net NICs, NIC K forwarded from 127.0.0.1:\$((LAB_PORT_BASE+K))"
LAB_SMP="8,sockets=4,cores=1,threads=2"
LAB_NODES=()
LAB_MODULES="virtio_net"
lab_devices() {
  local k
  for k in 0 1 2 3; do
    lab_args -netdev "user,id=n$k,net=10.0.$((10 + k)).0/24,restrict=on,hostfwd=tcp:127.0.0.1:$((LAB_PORT_BASE + k))-10.0.$((10 + k)).15:8000" \
      -device "virtio-net-pci,netdev=n$k,mac=52:54:00:00:00:1$k"
  done
}
# Runs in the guest before the command: NIC K (found by its MAC) gets 10.0.(10+K).15/24.
LAB_GUEST_SETUP='
for k in 0 1 2 3; do
  for d in /sys/class/net/*; do
    if [ "$(cat $d/address)" = "52:54:00:00:00:1$k" ]; then
      ip addr add 10.0.$((10 + k)).15/24 dev ${d##*/}; ip link set ${d##*/} up
    fi
  done
done
ip link set lo up'
