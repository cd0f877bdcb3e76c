//! The plain timer everyone writes first: a `BinaryHeap` of deadlines under a `Mutex`, a
//! `Condvar` to sleep on, a map from id to task, lazy removal of cancelled entries.

use parking_lot::{Condvar, Mutex};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

type Task = Box<dyn FnOnce() + Send>;

struct State {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    tasks: HashMap<u64, Task>,
    next_id: u64,
    stopped: bool,
}

struct Inner {
    state: Mutex<State>,
    wake: Condvar,
}

/// A heap-and-condvar timer on its own thread.
pub struct HeapTimer {
    inner: Arc<Inner>,
    worker: Option<thread::JoinHandle<()>>,
}

impl HeapTimer {
    /// Starts the worker thread.
    pub fn new() -> Self {
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                heap: BinaryHeap::new(),
                tasks: HashMap::new(),
                next_id: 0,
                stopped: false,
            }),
            wake: Condvar::new(),
        });
        let worker_inner = inner.clone();
        let worker = thread::Builder::new()
            .name("heap-timer".to_owned())
            .spawn(move || run(&worker_inner))
            .expect("spawn the baseline thread");
        HeapTimer {
            inner,
            worker: Some(worker),
        }
    }

    /// Runs `task` after `delay`; returns an id for [`HeapTimer::cancel`].
    pub fn schedule(&self, delay: Duration, task: impl FnOnce() + Send + 'static) -> u64 {
        let deadline = Instant::now() + delay;
        let mut state = self.inner.state.lock();
        let id = state.next_id;
        state.next_id += 1;
        let earliest = state
            .heap
            .peek()
            .is_none_or(|Reverse((first, _))| deadline < *first);
        state.heap.push(Reverse((deadline, id)));
        state.tasks.insert(id, Box::new(task));
        drop(state);
        if earliest {
            self.inner.wake.notify_one();
        }
        id
    }

    /// Cancels a task; its heap entry is skipped when it comes up.
    pub fn cancel(&self, id: u64) -> bool {
        let task = self.inner.state.lock().tasks.remove(&id);
        task.is_some()
    }
}

impl Default for HeapTimer {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for HeapTimer {
    fn drop(&mut self) {
        self.inner.state.lock().stopped = true;
        self.inner.wake.notify_one();
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

fn run(inner: &Inner) {
    let mut due: Vec<Task> = Vec::new();
    let mut state = inner.state.lock();
    loop {
        if state.stopped {
            return;
        }
        let now = Instant::now();
        while let Some(&Reverse((deadline, id))) = state.heap.peek() {
            if deadline > now {
                break;
            }
            state.heap.pop();
            if let Some(task) = state.tasks.remove(&id) {
                due.push(task);
            }
        }
        if !due.is_empty() {
            parking_lot::MutexGuard::unlocked(&mut state, || {
                for task in due.drain(..) {
                    task();
                }
            });
            continue;
        }
        match state.heap.peek() {
            Some(&Reverse((deadline, _))) => {
                inner.wake.wait_until(&mut state, deadline);
            }
            None => inner.wake.wait(&mut state),
        }
    }
}
