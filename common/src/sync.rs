//! The one poison-tolerant mutex lock every crate uses.
//!
//! A panic while a `std::sync::Mutex` is held poisons it; `lock` takes the value anyway. That is
//! right only where every critical section leaves the value consistent at each step (a single map
//! insert or remove, one assignment, a take/put of an `Option`, one call on a self-contained
//! value), which is how every caller in this workspace uses it. Code whose critical section spans
//! several dependent updates must not use it.

use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::PoisonError;

/// `mutex.lock()`, taking the value of a poisoned mutex as it is.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_mutex_is_still_read() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = m2.lock().unwrap();
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
    }
}
