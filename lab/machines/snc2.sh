# snc2 — a machine whose packages and last-level caches span NUMA nodes (Intel sub-NUMA
# clustering, AMD NPS): 2 packages of 4 cores; node 0 holds CPUs 0-1 and 4-5, node 1 holds
# 2-3 and 6-7, so each package (and its L3) is split over both nodes and each node over both
# packages. The HBA (one interrupt) sits on node 0. On such a machine a device's `near`
# (its interrupt CPU's LLC) reaches into the other node: on/near/far must stay disjoint.
LAB_DESCRIPTION="2 packages x 4 cores, nodes interleaved (0: CPUs 0-1,4-5; 1: 2-3,6-7); HBA + 1 disk on node 0"
LAB_SMP="8,sockets=2,cores=4,threads=1"
LAB_NODES=("cpus=0-1,cpus=4-5" "cpus=2-3,cpus=6-7")
LAB_MODULES="megaraid_sas sd_mod"
lab_devices() {
  lab_root_port 0 rp0
  lab_args -device megasas-gen2,id=hba0,bus=rp0
  lab_args -drive "file=$(lab_disk hba0-a 64M),if=none,id=hda,format=raw" \
    -device scsi-hd,drive=hda,bus=hba0.0,serial=lab-hba0-a
}
