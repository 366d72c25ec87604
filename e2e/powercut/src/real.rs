//! The definitions the hooks forward to: the next ones in the dynamic linker's search order
//! (`dlsym(RTLD_NEXT, ..)`, normally glibc's), looked up once and cached.
//!
//! The hooks must never call `libc::fsync`, `libc::rename`, ... directly: inside this shared
//! object those names resolve to the hooks themselves.

use std::ffi::{c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use libc::{c_char, c_int, c_uint};

/// The address of `name` in the objects loaded after this one, cached in `slot`; null when
/// none defines it (`renameat2` before glibc 2.28).
fn lookup(slot: &AtomicPtr<c_void>, name: &CStr) -> *mut c_void {
    let cached = slot.load(Ordering::Acquire);
    if !cached.is_null() {
        return cached;
    }
    // SAFETY: `name` is NUL-terminated; RTLD_NEXT is a valid pseudo-handle for dlsym.
    let found = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    // Two threads racing here store the same address.
    slot.store(found, Ordering::Release);
    found
}

/// Declares `pub fn $name() -> Option<fn type>` returning the next definition of `$symbol`.
macro_rules! next {
    ($name:ident, $symbol:literal, fn($($arg:ty),*)) => {
        pub fn $name() -> Option<unsafe extern "C" fn($($arg),*) -> c_int> {
            static SLOT: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());
            let addr = lookup(&SLOT, $symbol);
            // SAFETY: a non-null address dlsym found for this symbol is glibc's function of
            // exactly this C signature (see the man page of each).
            (!addr.is_null()).then(|| unsafe {
                std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> c_int>(addr)
            })
        }
    };
}

next!(fsync, c"fsync", fn(c_int));
next!(fdatasync, c"fdatasync", fn(c_int));
next!(rename, c"rename", fn(*const c_char, *const c_char));
next!(renameat, c"renameat", fn(c_int, *const c_char, c_int, *const c_char));
next!(renameat2, c"renameat2", fn(c_int, *const c_char, c_int, *const c_char, c_uint));
next!(unlink, c"unlink", fn(*const c_char));
next!(unlinkat, c"unlinkat", fn(c_int, *const c_char, c_int));
next!(connect, c"connect", fn(c_int, *const libc::sockaddr, libc::socklen_t));
