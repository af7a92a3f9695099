# nic2 — case 2's question on a NIC: 2 NUMA nodes, each one package of 1 core x 2 threads
# (node N = CPUs 2N, 2N+1), and two virtio-net NICs
# wired back to back through a QEMU hub (no user networking, nothing leaves the guest). The
# guest set-up names them nica (10.0.50.1/24) and nicb, which it moves into the network
# namespace `peer` (10.0.50.2/24): traffic between the two crosses both NICs' queues and
# raises their interrupts, which can be moved.
LAB_DESCRIPTION="2 nodes x 1 package x 2 threads; NICs nica (10.0.50.1) and nicb (netns peer, 10.0.50.2) wired back to back"
LAB_SMP="4,sockets=2,cores=1,threads=2"
LAB_NODES=("cpus=0-1" "cpus=2-3")
LAB_MODULES="virtio_net"
lab_devices() {
  lab_args -netdev hubport,id=na,hubid=0 -device virtio-net-pci,netdev=na,mac=52:54:00:00:00:20
  lab_args -netdev hubport,id=nb,hubid=0 -device virtio-net-pci,netdev=nb,mac=52:54:00:00:00:21
}
LAB_GUEST_SETUP='
ip netns add peer
for d in /sys/class/net/*; do
  n=${d##*/}
  case "$(cat $d/address)" in
  52:54:00:00:00:20) ip link set $n name nica ;;
  52:54:00:00:00:21) ip link set $n netns peer; ip -n peer link set $n name nicb ;;
  esac
done
ip addr add 10.0.50.1/24 dev nica; ip link set nica up
ip -n peer addr add 10.0.50.2/24 dev nicb; ip -n peer link set nicb up
ip link set lo up; ip -n peer link set lo up'
