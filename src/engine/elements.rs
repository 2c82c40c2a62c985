//! Elements viewed as bytes, and encoded as native-endian bytes when they cannot be viewed.

use crate::dtype::Element;

/// Views a slice of POD elements as bytes.
pub(crate) fn as_bytes<T: Element>(v: &[T]) -> Option<&[u8]> {
    if T::POD {
        // SAFETY: POD elements have no padding and every byte is initialised (Element's
        // contract); the byte slice covers exactly the same memory.
        Some(unsafe {
            std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v))
        })
    } else {
        None
    }
}

/// Views a mutable slice of POD elements as bytes.
pub(crate) fn as_bytes_mut<T: Element>(v: &mut [T]) -> Option<&mut [u8]> {
    if T::POD {
        // SAFETY: as in `as_bytes`; in addition every bit pattern is a valid `T`, so any
        // bytes written through the view leave valid elements.
        Some(unsafe {
            std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v))
        })
    } else {
        None
    }
}

/// Encodes elements as native-endian bytes.
pub(crate) fn elements_to_bytes<T: Element>(v: &[T], itemsize: usize) -> Vec<u8> {
    match as_bytes(v) {
        Some(b) => b.to_vec(),
        None => {
            let mut out = vec![0u8; v.len() * itemsize];
            for (x, c) in v.iter().zip(out.chunks_exact_mut(itemsize)) {
                x.write_ne_bytes(c);
            }
            out
        }
    }
}
