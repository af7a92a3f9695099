# cells4 — case 0's 4-cell box: 4 NUMA nodes, each one package of 2 cores x 2 threads
# (CPUs 4N..4N+3 on node N); a megasas-gen2 HBA (one interrupt, like the seed's FC HBAs)
# with two scsi-hd disks on node 0; an NVMe with 4 I/O queue pairs (fewer than the 16 CPUs,
# so several CPUs share each queue's managed interrupt) on node 2.
LAB_DESCRIPTION="4 nodes x 1 package x 2 cores x 2 threads; HBA + 2 disks on node 0; NVMe (4 queues) on node 2"
LAB_SMP="16,sockets=4,cores=2,threads=2"
LAB_NODES=("cpus=0-3" "cpus=4-7" "cpus=8-11" "cpus=12-15")
LAB_MODULES="megaraid_sas sd_mod nvme"
lab_devices() {
  lab_root_port 0 rp0
  lab_args -device megasas-gen2,id=hba0,bus=rp0
  lab_args -drive "file=$(lab_disk hba0-a 64M),if=none,id=hda,format=raw" \
    -device scsi-hd,drive=hda,bus=hba0.0,serial=lab-hba0-a
  lab_args -drive "file=$(lab_disk hba0-b 64M),if=none,id=hdb,format=raw" \
    -device scsi-hd,drive=hdb,bus=hba0.0,serial=lab-hba0-b
  lab_root_port 2 rp2
  lab_args -drive "file=$(lab_disk nvme0 64M),if=none,id=nv0,format=raw" \
    -device nvme,serial=lab-nvme0,max_ioqpairs=4,drive=nv0,bus=rp2
}
