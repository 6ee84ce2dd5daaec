//! mimalloc as Rust's global allocator, by way of its plain calls whenever they suffice.
//!
//! The `mimalloc` crate passes every allocation to `mi_malloc_aligned`. In mimalloc 3 that
//! call is fast only for blocks up to 1 KiB; a larger one is treated as naturally aligned
//! only when its block size is a power of two, and otherwise over-allocated by the alignment
//! and marked as holding interior pointers (a slower path on allocation and on free), even
//! when the alignment asked for is 8. A server's per-request futures are often over 1 KiB,
//! so a GET took that path four times (see `BENCHMARKS.md`, issue 22; the same finding as
//! purpleprotocol/mimalloc_rust#170). Every block of mimalloc's is at least word aligned (block
//! sizes are whole words, a page's first block 16-byte aligned), so a layout whose alignment
//! is at most a word is served by `mi_malloc`; any other keeps the aligned calls.

#![warn(missing_docs)]

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as ffi;

/// The alignment every mimalloc block has whatever its size: a machine word.
const WORD_ALIGN: usize = std::mem::size_of::<usize>();

/// mimalloc, its plain calls for word-aligned layouts, its aligned ones otherwise.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mimalloc;

fn is_plain(align: usize) -> bool {
    align <= WORD_ALIGN
}

// SAFETY: every method returns memory from mimalloc aligned as its layout asks (plain calls
// only for alignments every block satisfies), and frees it with mimalloc's own `mi_free`,
// which takes any pointer either kind of call returned.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_plain(layout.align()) {
            // SAFETY: mi_malloc takes any size; null means out of memory, as alloc's contract.
            unsafe { ffi::mi_malloc(layout.size()) }.cast()
        } else {
            // SAFETY: the layout's alignment is a power of two, as mi_malloc_aligned requires.
            unsafe { ffi::mi_malloc_aligned(layout.size(), layout.align()) }.cast()
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_plain(layout.align()) {
            // SAFETY: as in alloc, the block zeroed.
            unsafe { ffi::mi_zalloc(layout.size()) }.cast()
        } else {
            // SAFETY: as in alloc, the block zeroed.
            unsafe { ffi::mi_zalloc_aligned(layout.size(), layout.align()) }.cast()
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: the caller passes a pointer this allocator returned, which mimalloc made.
        unsafe { ffi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if is_plain(layout.align()) {
            // SAFETY: ptr came from this allocator; a moved block is a new plain one, word
            // aligned as the layout needs.
            unsafe { ffi::mi_realloc(ptr.cast::<c_void>(), new_size) }.cast()
        } else {
            // SAFETY: ptr came from this allocator with this alignment, a power of two.
            unsafe { ffi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()) }
                .cast()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes around mimalloc's size classes and its 1 KiB small-block limit.
    fn sizes() -> impl Iterator<Item = usize> {
        (1..=130).chain((1000..=1100).step_by(3)).chain([
            2047,
            2048,
            2049,
            4095,
            4096,
            4097,
            65_535,
            1 << 20,
            (1 << 22) + 3,
        ])
    }

    fn layouts() -> impl Iterator<Item = Layout> {
        sizes().flat_map(|size| {
            [1, 2, 4, 8, 16, 32, 64, 128, 4096]
                .into_iter()
                .filter_map(move |align| Layout::from_size_align(size, align).ok())
        })
    }

    #[test]
    fn every_block_is_aligned_as_its_layout_asks_and_holds_its_size() {
        for layout in layouts() {
            // Several at once, so that blocks other than a page's first are checked too.
            // SAFETY: a layout of non-zero size.
            let blocks: [*mut u8; 4] = std::array::from_fn(|_| unsafe { Mimalloc.alloc(layout) });
            for (i, &block) in blocks.iter().enumerate() {
                assert!(!block.is_null(), "{layout:?}");
                assert_eq!(block as usize % layout.align(), 0, "{layout:?}");
                // SAFETY: the block holds layout.size() bytes.
                unsafe { block.write_bytes(i as u8, layout.size()) };
            }
            for (i, &block) in blocks.iter().enumerate() {
                // SAFETY: written above, size bytes.
                let bytes = unsafe { std::slice::from_raw_parts(block, layout.size()) };
                assert!(bytes.iter().all(|&b| b == i as u8), "{layout:?}");
                // SAFETY: allocated above with this layout.
                unsafe { Mimalloc.dealloc(block, layout) };
            }
        }
    }

    #[test]
    fn zeroed_blocks_are_zero_and_aligned() {
        for layout in layouts() {
            // SAFETY: a layout of non-zero size.
            let block = unsafe { Mimalloc.alloc_zeroed(layout) };
            assert_eq!(block as usize % layout.align(), 0, "{layout:?}");
            // SAFETY: the block holds layout.size() bytes.
            let bytes = unsafe { std::slice::from_raw_parts(block, layout.size()) };
            assert!(bytes.iter().all(|&b| b == 0), "{layout:?}");
            // SAFETY: allocated above with this layout.
            unsafe { Mimalloc.dealloc(block, layout) };
        }
    }

    #[test]
    fn a_grown_then_shrunk_block_keeps_its_bytes_and_alignment() {
        for layout in layouts().filter(|l| l.size() <= 4097) {
            // SAFETY: a layout of non-zero size.
            let mut block = unsafe { Mimalloc.alloc(layout) };
            // SAFETY: the block holds layout.size() bytes.
            unsafe { block.write_bytes(0xA5, layout.size()) };
            let (mut current, mut written) = (layout, layout.size());
            for new_size in [layout.size() * 3 + 1000, layout.size().div_ceil(2)] {
                // SAFETY: block came from this allocator with `current`; new_size > 0.
                block = unsafe { Mimalloc.realloc(block, current, new_size) };
                assert_eq!(
                    block as usize % layout.align(),
                    0,
                    "{layout:?} -> {new_size}"
                );
                written = written.min(new_size);
                // SAFETY: the block holds at least `written` bytes written before.
                let bytes = unsafe { std::slice::from_raw_parts(block, written) };
                assert!(bytes.iter().all(|&b| b == 0xA5), "{layout:?} -> {new_size}");
                current = Layout::from_size_align(new_size, layout.align()).unwrap();
            }
            // SAFETY: block came from realloc with `current`.
            unsafe { Mimalloc.dealloc(block, current) };
        }
    }
}
