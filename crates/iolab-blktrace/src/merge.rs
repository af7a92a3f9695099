//! Merges several record streams (one per CPU, or several traces) into one stream ordered by
//! time, holding one pending record per stream: memory does not grow with trace length.
//! Ties keep the order of the inputs, so records of one CPU stay in their recorded order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Read;
use std::path::PathBuf;

use super::blk_io_trace::Event;
use super::stream::{resolve_input, RecordStream, Source, TraceError};

/// A time-ordered merge of streams.
pub struct Merged<R> {
    streams: Vec<RecordStream<R>>,
    pending: Vec<Option<Event>>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    primed: bool,
    failed: bool,
}

impl<R: Read> Merged<R> {
    pub fn new(streams: Vec<RecordStream<R>>) -> Self {
        let n = streams.len();
        Merged {
            streams,
            pending: (0..n).map(|_| None).collect(),
            heap: BinaryHeap::with_capacity(n),
            primed: false,
            failed: false,
        }
    }

    fn pull(&mut self, i: usize) -> Result<(), TraceError> {
        match self.streams[i].next_event() {
            Some(Ok(ev)) => {
                self.heap.push(Reverse((ev.time, i)));
                self.pending[i] = Some(ev);
                Ok(())
            }
            Some(Err(e)) => Err(e),
            None => Ok(()),
        }
    }
}

impl<R: Read> Merged<R> {
    /// Appends records in time order to `out` until it holds `max`, offering each to `keep`
    /// first (see [`RecordStream::read_io_batch`]); returns false at the end of input.
    pub fn read_io_batch(
        &mut self,
        out: &mut super::stream::IoBatch,
        max: usize,
        keep: &mut impl FnMut(&super::blk_io_trace::Io) -> bool,
    ) -> Result<bool, TraceError> {
        if self.streams.len() == 1 && !self.failed {
            let r = self.streams[0].read_io_batch(out, max, keep);
            if r.is_err() {
                self.failed = true;
            }
            return r;
        }
        while out.ios.len() < max {
            match self.next() {
                Some(Ok(ev)) => out.push_event_if(ev, keep),
                Some(Err(e)) => return Err(e),
                None => return Ok(false),
            }
        }
        Ok(true)
    }
}

impl<R: Read> Iterator for Merged<R> {
    type Item = Result<Event, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        // One stream: no heap needed (the common case of a merged file).
        if self.streams.len() == 1 {
            let r = self.streams[0].next_event();
            if matches!(r, Some(Err(_))) {
                self.failed = true;
            }
            return r;
        }
        if !self.primed {
            self.primed = true;
            for i in 0..self.streams.len() {
                if let Err(e) = self.pull(i) {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        let Reverse((_, i)) = self.heap.pop()?;
        let ev = self.pending[i].take()?;
        if let Err(e) = self.pull(i) {
            self.failed = true;
            return Some(Err(e));
        }
        Some(Ok(ev))
    }
}

/// Opens the traces named on a command line (each a file or a per-CPU base name) as one
/// time-ordered stream.
pub fn open_trace(names: &[PathBuf]) -> Result<Merged<Source>, TraceError> {
    let mut streams = Vec::new();
    for name in names {
        for path in resolve_input(name)? {
            streams.push(RecordStream::open(&path)?);
        }
    }
    if streams.is_empty() {
        return Err(TraceError::Input("no trace given".into()));
    }
    Ok(Merged::new(streams))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blk_io_trace::{encode, Endian};

    #[test]
    fn merges_by_time_keeping_stream_order_on_ties() {
        let mk = |times: &[u64], cpu: u32| {
            let mut b = Vec::new();
            for &t in times {
                let ev = Event {
                    version: 7,
                    time: t,
                    cpu,
                    ..Event::default()
                };
                encode(&ev, 7, Endian::Little, &mut b);
            }
            b
        };
        let a = mk(&[1, 4, 4, 9], 0);
        let b = mk(&[2, 4, 10], 1);
        let m = Merged::new(vec![
            RecordStream::new("a".into(), &a[..]),
            RecordStream::new("b".into(), &b[..]),
        ]);
        let got: Vec<(u64, u32)> = m.map(|e| e.map(|e| (e.time, e.cpu)).unwrap()).collect();
        assert_eq!(
            got,
            vec![(1, 0), (2, 1), (4, 0), (4, 0), (4, 1), (9, 0), (10, 1)]
        );
    }
}
