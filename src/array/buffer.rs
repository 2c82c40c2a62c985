//! Output buffers for reads: allocated zeroed and, when large, advised to use transparent
//! huge pages.
//!
//! A fresh buffer costs a page fault (and the kernel zeroing the page) on first touch, one
//! per 4 KiB page: for a large read that took longer than decoding the chunks into it. With
//! huge pages it is one fault per 2 MiB. Asking for zeroed memory costs nothing extra here:
//! large allocations come as fresh pages, which the kernel zeroes anyway.

use crate::dtype::Element;

/// Buffers at least this large are advised to use huge pages (numpy uses the same bound).
const HUGE_PAGE_MIN: usize = 4 << 20;

/// A vector of `n` elements whose bytes are all zero.
///
/// # Panics
/// When `T` is not plain data ([`Element::POD`]).
pub(crate) fn zeroed<T: Element>(n: usize) -> Vec<T> {
    assert!(T::POD, "zeroed buffers hold plain elements only");
    let Ok(layout) = std::alloc::Layout::array::<T>(n) else {
        // Larger than the address space: let Vec report it.
        return Vec::with_capacity(n);
    };
    if layout.size() == 0 {
        return vec![T::default(); n];
    }
    // SAFETY: the layout has a non-zero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    advise_huge_pages(ptr, layout.size());
    // SAFETY: `ptr` was allocated by the global allocator with the layout of `n` `T`s, and
    // all-zero bytes are a valid `T` (POD elements have no invalid bit patterns).
    unsafe { Vec::from_raw_parts(ptr.cast::<T>(), n, n) }
}

/// Asks the kernel to back the untouched pages of `[ptr, ptr + len)` with huge pages.
fn advise_huge_pages(ptr: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    if len >= HUGE_PAGE_MIN {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let start = (ptr as usize).next_multiple_of(page);
        let end = (ptr as usize + len) / page * page;
        if end > start {
            // SAFETY: the range lies inside one live allocation; MADV_HUGEPAGE changes only
            // how the kernel backs it, not its contents. Failure (THP disabled) is harmless.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_buffers() {
        for n in [0, 1, 1000, (8 << 20) / 8 + 3] {
            let v = zeroed::<f64>(n);
            assert_eq!(v.len(), n);
            assert!(v.iter().all(|&x| x.to_bits() == 0));
            let b = zeroed::<u8>(n);
            assert!(b.iter().all(|&x| x == 0));
        }
    }
}
