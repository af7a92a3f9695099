//! "Does this device carry a filesystem, a partition table or a volume-manager label?" answered
//! from bytes alone, the way blkid does, but only for the yes/no question iolab needs before it
//! lets a workload write. Pure functions over the device's first MiB and last 128 KiB, so
//! every format is tested against hand-built images; the I/O that fetches the bytes is in
//! `data.rs`.
//!
//! Offsets (bytes from the start of the device unless said otherwise), as documented by the
//! formats and used by util-linux's libblkid:
//! ext2/3/4 magic 0xEF53 (LE u16) at 1024+56; XFS "XFSB" at 0; btrfs "_BHRfS_M" at 64 KiB+64;
//! swap "SWAPSPACE2"/"SWAP-SPACE" in the last 10 bytes of the first page (4, 8, 16 or 64 KiB
//! pages); GPT "EFI PART" at LBA 1 (512 or 4096); MBR 0x55AA at 510 with a non-empty partition
//! entry; LVM2 "LABELONE" at the start of one of sectors 0-3 with "LVM2 001" at +24; MD 1.1 / 1.2
//! superblock magic 0xa92b4efc (LE) at 0 / 4096, MD 0.90 at the last 64 KiB-aligned 64 KiB
//! block and 1.0 at 8 KiB from the end (4 KiB-aligned); LUKS "LUKS\xba\xbe" at 0; ISO 9660
//! "CD001" at 32769; FAT "FAT12   "/"FAT16   " at 54 or "FAT32   " at 82; NTFS and exFAT OEM
//! names "NTFS    " / "EXFAT   " at 3; bcache's 16-byte magic at 4096+24; ZFS uberblock magic
//! 0x00bab10c (either byte order) in label 0's uberblock ring (128 KiB..256 KiB, 1 KiB slots);
//! f2fs 0xF2F52010 (LE) at 1024; squashfs "hsqs" at 0.

/// How much of the start of a device `detect` wants to see.
pub(crate) const HEAD_BYTES: usize = 1 << 20;
/// How much of the end of a device `detect` wants to see (MD 0.90 / 1.0 live there).
pub(crate) const TAIL_BYTES: usize = 128 << 10;

const MD_MAGIC: u32 = 0xa92b_4efc;
const BCACHE_MAGIC: [u8; 16] = [
    0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca, 0x82, 0x65, 0xf5, 0x7f, 0x48, 0xba, 0x6d, 0x81,
];
const ZFS_UBERBLOCK_MAGIC: u64 = 0x00ba_b10c;

/// What was found on the device (a name a user recognises).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Signature {
    Ext,
    Xfs,
    Btrfs,
    Swap,
    Gpt,
    Mbr,
    Lvm2,
    MdRaid,
    Luks,
    Iso9660,
    Vfat,
    Ntfs,
    Exfat,
    Bcache,
    Zfs,
    F2fs,
    Squashfs,
}

impl Signature {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Signature::Ext => "ext2/3/4 filesystem",
            Signature::Xfs => "XFS filesystem",
            Signature::Btrfs => "btrfs filesystem",
            Signature::Swap => "swap area",
            Signature::Gpt => "GPT partition table",
            Signature::Mbr => "MBR partition table",
            Signature::Lvm2 => "LVM2 physical volume",
            Signature::MdRaid => "MD RAID member",
            Signature::Luks => "LUKS encrypted volume",
            Signature::Iso9660 => "ISO 9660 filesystem",
            Signature::Vfat => "FAT filesystem",
            Signature::Ntfs => "NTFS filesystem",
            Signature::Exfat => "exFAT filesystem",
            Signature::Bcache => "bcache device",
            Signature::Zfs => "ZFS pool member",
            Signature::F2fs => "F2FS filesystem",
            Signature::Squashfs => "squashfs image",
        }
    }
}

fn at(buf: &[u8], off: usize, len: usize) -> Option<&[u8]> {
    buf.get(off..off.checked_add(len)?)
}

fn has(buf: &[u8], off: usize, magic: &[u8]) -> bool {
    at(buf, off, magic.len()) == Some(magic)
}

fn le_u16(buf: &[u8], off: usize) -> Option<u16> {
    at(buf, off, 2).map(|b| u16::from_le_bytes([b[0], b[1]]))
}

fn le_u32(buf: &[u8], off: usize) -> Option<u32> {
    at(buf, off, 4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
}

fn le_u64(buf: &[u8], off: usize) -> Option<u64> {
    at(buf, off, 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// Every signature found. `head` is the first bytes of the device (up to `HEAD_BYTES`);
/// `tail` is the last bytes (up to `TAIL_BYTES`) and `size` the device size in bytes.
pub(crate) fn detect(head: &[u8], tail: &[u8], size: u64) -> Vec<Signature> {
    let mut found = Vec::new();
    let mut add = |s: Signature, cond: bool| {
        if cond && !found.contains(&s) {
            found.push(s);
        }
    };
    add(Signature::Ext, le_u16(head, 1080) == Some(0xEF53));
    add(Signature::Xfs, has(head, 0, b"XFSB"));
    add(Signature::Btrfs, has(head, 65_600, b"_BHRfS_M"));
    add(
        Signature::Swap,
        [4096usize, 8192, 16_384, 65_536]
            .iter()
            .any(|&p| has(head, p - 10, b"SWAPSPACE2") || has(head, p - 10, b"SWAP-SPACE")),
    );
    add(
        Signature::Gpt,
        has(head, 512, b"EFI PART") || has(head, 4096, b"EFI PART"),
    );
    let fat =
        has(head, 54, b"FAT12   ") || has(head, 54, b"FAT16   ") || has(head, 82, b"FAT32   ");
    let ntfs = has(head, 3, b"NTFS    ");
    let exfat = has(head, 3, b"EXFAT   ");
    add(Signature::Vfat, fat);
    add(Signature::Ntfs, ntfs);
    add(Signature::Exfat, exfat);
    // A boot sector of FAT/NTFS also ends in 0x55AA; only call it a partition table when it is
    // not one of those and at least one of the four entries is in use.
    add(
        Signature::Mbr,
        !fat && !ntfs && !exfat && mbr_has_partitions(head),
    );
    add(
        Signature::Lvm2,
        (0..4).any(|s| has(head, s * 512, b"LABELONE") && has(head, s * 512 + 24, b"LVM2 001")),
    );
    add(
        Signature::MdRaid,
        md_at_start(head) || md_at_end(tail, size),
    );
    add(Signature::Luks, has(head, 0, b"LUKS\xba\xbe"));
    add(Signature::Iso9660, has(head, 32_769, b"CD001"));
    add(Signature::Bcache, has(head, 4096 + 24, &BCACHE_MAGIC));
    add(Signature::Zfs, zfs_uberblock(head));
    add(Signature::F2fs, le_u32(head, 1024) == Some(0xF2F5_2010));
    add(Signature::Squashfs, has(head, 0, b"hsqs"));
    found
}

fn mbr_has_partitions(head: &[u8]) -> bool {
    if !has(head, 510, &[0x55, 0xAA]) {
        return false;
    }
    (0..4).any(|i| {
        let e = 446 + 16 * i;
        let status = head.get(e).copied().unwrap_or(0);
        let kind = head.get(e + 4).copied().unwrap_or(0);
        kind != 0 && (status == 0 || status == 0x80)
    })
}

fn md_at_start(head: &[u8]) -> bool {
    le_u32(head, 0) == Some(MD_MAGIC) || le_u32(head, 4096) == Some(MD_MAGIC)
}

/// MD 0.90 (last 64 KiB-aligned 64 KiB block; native-endian, so check both) and 1.0
/// (8 KiB before the end, rounded down to 4 KiB).
fn md_at_end(tail: &[u8], size: u64) -> bool {
    let tail_start = size.saturating_sub(tail.len() as u64);
    let in_tail = |abs: u64| -> Option<u32> {
        let off = abs.checked_sub(tail_start)? as usize;
        le_u32(tail, off)
    };
    let mut offsets = Vec::new();
    if size >= 128 << 10 {
        offsets.push((size & !0xFFFF) - 0x10000);
    }
    if size >= 12 << 10 {
        offsets.push((size - 8192) & !4095);
    }
    offsets
        .into_iter()
        .any(|o| matches!(in_tail(o), Some(m) if m == MD_MAGIC || m.swap_bytes() == MD_MAGIC))
}

fn zfs_uberblock(head: &[u8]) -> bool {
    (128usize..256).any(|k| {
        le_u64(head, k * 1024)
            .map(|m| m == ZFS_UBERBLOCK_MAGIC || m.swap_bytes() == ZFS_UBERBLOCK_MAGIC)
            .unwrap_or(false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blank() -> Vec<u8> {
        vec![0u8; HEAD_BYTES]
    }

    fn put(buf: &mut [u8], off: usize, bytes: &[u8]) {
        buf[off..off + bytes.len()].copy_from_slice(bytes);
    }

    fn only(head: &[u8]) -> Vec<Signature> {
        detect(head, &[], HEAD_BYTES as u64 * 4)
    }

    #[test]
    fn a_blank_device_has_no_signature() {
        assert!(only(&blank()).is_empty());
        assert!(detect(&[], &[], 0).is_empty());
        assert!(detect(&[0xff; 7], &[1, 2], 9).is_empty());
    }

    #[test]
    fn finds_each_format_at_its_offset() {
        let md = MD_MAGIC.to_le_bytes();
        let zfs = ZFS_UBERBLOCK_MAGIC.to_be_bytes();
        let f2fs = 0xF2F5_2010u32.to_le_bytes();
        let cases: Vec<(usize, &[u8], Signature)> = vec![
            (1080, &[0x53, 0xEF], Signature::Ext),
            (0, b"XFSB", Signature::Xfs),
            (65_600, b"_BHRfS_M", Signature::Btrfs),
            (4086, b"SWAPSPACE2", Signature::Swap),
            (65_526, b"SWAP-SPACE", Signature::Swap),
            (512, b"EFI PART", Signature::Gpt),
            (4096, b"EFI PART", Signature::Gpt),
            (
                1536,
                b"LABELONE\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0LVM2 001",
                Signature::Lvm2,
            ),
            (4096, &md, Signature::MdRaid),
            (0, &md, Signature::MdRaid),
            (0, b"LUKS\xba\xbe", Signature::Luks),
            (32_769, b"CD001", Signature::Iso9660),
            (82, b"FAT32   ", Signature::Vfat),
            (3, b"NTFS    ", Signature::Ntfs),
            (3, b"EXFAT   ", Signature::Exfat),
            (4120, &BCACHE_MAGIC, Signature::Bcache),
            (200 * 1024, &zfs, Signature::Zfs),
            (1024, &f2fs, Signature::F2fs),
            (0, b"hsqs", Signature::Squashfs),
        ];
        for (off, magic, want) in cases {
            let mut b = blank();
            put(&mut b, off, magic);
            assert_eq!(only(&b), vec![want], "{want:?} at {off}");
        }
    }

    #[test]
    fn lvm_label_needs_its_type_string() {
        let mut b = blank();
        put(&mut b, 512, b"LABELONE");
        assert!(only(&b).is_empty());
    }

    #[test]
    fn mbr_needs_a_used_entry_and_is_not_a_fat_boot_sector() {
        let mut b = blank();
        put(&mut b, 510, &[0x55, 0xAA]);
        assert!(only(&b).is_empty(), "signature alone, no entries");
        put(&mut b, 446 + 16 + 4, &[0x83]);
        assert_eq!(only(&b), vec![Signature::Mbr]);
        put(&mut b, 54, b"FAT16   ");
        assert_eq!(only(&b), vec![Signature::Vfat]);
    }

    #[test]
    fn md_superblocks_at_the_end_are_found() {
        let size: u64 = 10 * 1024 * 1024 + 12_345;
        let mut tail = vec![0u8; TAIL_BYTES];
        let tail_start = size - TAIL_BYTES as u64;
        let v090 = (size & !0xFFFF) - 0x10000;
        put(
            &mut tail,
            (v090 - tail_start) as usize,
            &MD_MAGIC.to_be_bytes(),
        );
        assert_eq!(detect(&blank(), &tail, size), vec![Signature::MdRaid]);
        let mut tail = vec![0u8; TAIL_BYTES];
        let v10 = (size - 8192) & !4095;
        put(
            &mut tail,
            (v10 - tail_start) as usize,
            &MD_MAGIC.to_le_bytes(),
        );
        assert_eq!(detect(&blank(), &tail, size), vec![Signature::MdRaid]);
    }

    #[test]
    fn truncated_input_never_panics() {
        let mut b = blank();
        put(&mut b, 1080, &[0x53, 0xEF]);
        for len in [0, 1, 511, 512, 1081, 4095, 65_601] {
            let _ = detect(&b[..len], &b[..len.min(100)], len as u64);
        }
        assert_eq!(detect(&b[..1082], &[], 1082), vec![Signature::Ext]);
    }
}
