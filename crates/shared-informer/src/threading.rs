//! Which thread reads, decodes, allocates, applies, handles, frees and wakes: the path of one
//! watch event from the socket to the handlers, and what pacing, [`Reclaim`], decode lanes and
//! an [`InformerThread`] (with or without a batching window) change in it.
//!
//! This page is the one place that tells the whole path. Each piece documents only its own
//! mechanism and invariants where it is defined (listed at the end); the rules are in
//! docs/semantics.md, and the figures in docs/performance.md.
//!
//! # Why the threads matter
//!
//! Three costs decide where an informer's work runs.
//!
//! - **Which thread frees an object.** A decoded object is hundreds of small allocations (a
//!   k8s-openapi `Pod` is about 300), made by the thread that decodes it. glibc's malloc, the
//!   default allocator of Rust programs on Linux, keeps an arena per thread with a lock each, and
//!   a freed block goes back to the arena it came from. An object freed on another thread (a
//!   handler's, say) takes the decoding thread's arena lock while that thread allocates the next
//!   objects, and the two wait on each other; and when objects are decoded on whichever runtime
//!   worker happens to run the decoding, each worker's arena ends up holding a drifting share of
//!   the cache plus free memory it cannot hand over, so memory creeps up over a sustained watch.
//!   A library may not choose or tune its users' allocator, but it can choose where it allocates
//!   and frees: here **every object is allocated and freed by one thread**.
//! - **Thread wake-ups.** When events arrive one at a time, which is most of the time, an event
//!   costs more in the wake-ups of idle threads it causes than in its decoding: on a virtual
//!   machine, waking a thread costs more than decoding a pod. Every hand-off of an event from one
//!   thread to another is one more.
//! - **Work in flight.** An event read and not yet applied, or a notification not yet handled,
//!   may hold an object the cache has already replaced. client-go lets both grow without bound,
//!   and under a sustained watch on a busy machine the stages that free memory (applying to the
//!   cache, delivering to handlers) get less CPU than the one that allocates it (decoding), so
//!   memory climbs for as long as the burst lasts; here the work in flight is bounded by default
//!   (pacing, below).
//!
//! # The default path: a multi-threaded runtime on more than one core
//!
//! An informer started with [`SharedInformerFactory::start`] (or its
//! [`run`](crate::SharedIndexInformer::run) spawned on such a runtime) is three kinds of task on
//! the runtime's workers (the reflector's, the informer's, one per handler) and one thread
//! outside them, its reflector's decode lane. One watch event:
//!
//! 1. **Read.** The socket wakes a worker, which runs the reflector's task: it reads the chunk
//!    (an HTTP/1.1 watch polls a connection of its own, and its own reading wakes no task, WB1;
//!    an HTTP/2 watch is handed its chunks by the pooled connection's task) and splits
//!    the body into frames. *Wake-up: one worker, by the socket.*
//! 2. **Decode, allocate.** The frames go to the decode lane in batches, a bounded number in
//!    flight while the task reads on (W1–W5); the lane decodes each object once, into the
//!    `Arc<K>` that the queue, the cache and every handler then share (M1). *Wake-up: the lane.*
//! 3. **Back to the reader.** The lane notifies a ready signal registered with the runtime's I/O
//!    driver, which wakes one worker to run the reflector's task with the decoded batch (M6).
//!    *Wake-up: one worker, by the lane.*
//! 4. **Queue.** The reflector's task applies the events to the informer's queue
//!    (`Store::add`/`update`/`delete`), first checking that it has room (pacing, P2).
//! 5. **Cache.** The informer's task pops, writes the cache (the indexer) and collects the
//!    notifications of the pop. *Woken by the queue from the running worker, which normally runs
//!    it next: a task's wake-up, no thread's.*
//! 6. **Handlers.** Each handler has a delivery task, handed the notifications of one pop as one
//!    batch (D9), which calls the handler. *A task's wake-up per handler and pop, as above.*
//! 7. **Hand back.** Each delivery task gives what its handler is done with (an update's old
//!    object, a deletion's object) to the informer's [`Reclaim`], and the informer's task gives it
//!    a pop's superseded deltas and what no handler hears of; the `Reclaim` keeps only last
//!    references (G1–G3). *The first object kept wakes the reflector's task if it is waiting for
//!    events: a task's wake-up.*
//! 8. **Free.** The reflector's task passes what was kept to the lane, which frees it before its
//!    next decoding job (M7), on the thread that allocated it. *No wake-up of its own: the lane is
//!    woken for drops alone only once enough of them wait.*
//!
//! So an event that arrives alone costs three thread wake-ups: the socket's, the lane's and the
//! ready signal's. When events come faster than that, a woken thread finds several waiting and the
//! wake-ups are shared; then the lane pays off, decoding while the workers read and handle.
//!
//! A list is decoded the same way: its pages on the lane, applied by the reflector's task with
//! one `replace`. While no watch is read (listing, waiting to retry, stopped), whatever thread
//! lets go of an object last frees it (G2).
//!
//! # Without a lane
//!
//! There is no lane on a current-thread runtime, on a single core, or where the lane's thread
//! could not be started (M4); nor, for decoding, with a lister-watcher that decodes by other
//! means than this crate's decoders (M5). Then the reflector's task decodes each event itself
//! (steps 2 and 3 disappear) and frees what comes back through the [`Reclaim`] itself (step 8).
//! On a multi-threaded runtime that task may move between workers, so an object is then made and
//! freed by one task rather than by one thread.
//!
//! # What changes the picture
//!
//! ## Pacing: how far the reader runs ahead
//!
//! [`InformerOptions::pacing`](crate::InformerOptions::pacing), or
//! [`SharedInformerFactory::pacing`] for every informer of a factory. Default on
//! ([`Pacing`]'s defaults): the reflector's task stops reading while the queue holds
//! [`DEFAULT_QUEUE_HIGH_WATER`] (128) entries, leaving the events in the connection (P2); after
//! each pop, the informer's task waits for every handler with more than
//! [`DEFAULT_HANDLER_HIGH_WATER`] (256) notifications buffered to get down to half of it, but
//! never longer than [`DEFAULT_MAX_HANDLER_WAIT`] (500 ms) per pop, after which that handler lags
//! and is not waited for until it is back under half (P3, P4). Pacing moves no work between
//! threads and adds wake-ups only while something waits (each pop wakes a waiting reader; a
//! handler draining past half wakes a waiting informer). What it changes is memory: a burst no
//! longer fills unbounded buffers with objects the cache has replaced.
//!
//! Choose otherwise: `pacing: None` gives client-go's behaviour, a reader that never waits and
//! buffers that grow with the burst, where even one wait of `max_handler_wait` for a stuck
//! handler is unacceptable or where client-go's exact timing is wanted. A larger
//! `handler_high_water` (or a shorter `max_handler_wait`) suits handlers that fall behind in
//! bursts and catch up: they are waited for later, or for less time.
//!
//! ## `Reclaim`: which thread frees
//!
//! Always on in an informer, and not an option: every
//! [`SharedIndexInformer`](crate::SharedIndexInformer) gives its reflector a [`Reclaim`]
//! ([`Reflector::with_reclaim`]) and its handlers' delivery tasks hand objects back to it
//! (step 7). It moves the free of a replaced object from whatever
//! thread let go of it last to the thread that decoded it (step 8), for the price of keeping at
//! most [`Reclaim::CAPACITY`] objects until the reflector's task next runs. A [`Reflector`] used
//! on its own frees wherever the last reference goes unless it is given one; it is never needed
//! for correctness, and matters less under an allocator that frees across threads without a
//! shared lock (mimalloc, for one: the allocator is the application's choice).
//!
//! ## Decode lanes: decoding off the reading task
//!
//! Not an option either: a reflector uses a lane whenever it runs on a multi-threaded tokio
//! runtime of a machine with more than one core and its lister-watcher decodes through this
//! crate's decoders ([`HttpListerWatcher`], [`decode_watch_body`],
//! [`decode_watch_body_as`](reflector::decode_watch_body_as)), however that lister-watcher is
//! wrapped (M5). Lanes are threads of the process (`reflector-decode-N`), at most one per core,
//! started on first use and taken in turn by reflectors (M2); they do not count against the
//! runtime's workers, so on a one-worker runtime a lane is a second thread. A lane buys decoding
//! that overlaps reading and handling, and objects made and freed by one thread whatever the
//! workers do; it costs two of the three wake-ups of an event that arrives alone (steps 2 and 3).
//! Decoding such an event on the reading task instead, and only events read together on the
//! lane, takes those two wake-ups away and was measured and dropped: the objects it makes live in
//! the workers' arenas, while the ones they replace, made on the lane, leave free memory in the
//! lane's arena that nothing allocates again, so a watch's peak RSS climbed to 1.6–1.9× the RSS
//! at sync as the cache turned over, for 6% less CPU per typed `Pod` event at 2,000 events/s and
//! 15% at 200/s (docs/benchmarks.md, *Everyday rates on the default start*).
//! The way to go without one is to run the informer on a current-thread runtime: an
//! `InformerThread`.
//!
//! ## `InformerThread`: one thread, one wake-up per event
//!
//! [`SharedInformerFactory::start_on`] with an [`InformerThread`]'s
//! [`handle`](crate::InformerThread::handle) (or an informer's `run` spawned on it); by default
//! informers run where [`start`](crate::SharedInformerFactory::start) is called. The thread runs
//! a current-thread runtime, so there is no lane: the socket wakes the thread, and on it the
//! reflector's task reads and decodes, the informer's task writes the cache, the delivery tasks
//! call the handlers and the reflector's task frees what comes back. One thread wake-up per
//! event, and every object made and freed by that thread.
//!
//! The price: nothing overlaps, so at saturation an informer whose objects are costly to decode
//! handles a little less; and the handlers run on that thread (IT1), where one that blocks holds
//! up every informer started there. They stay there on purpose: with their delivery tasks on a
//! multi-threaded runtime instead, each notification wakes that runtime from outside, and the
//! informer costs as much CPU per event as one started there outright (docs/benchmarks-archive.md,
//! *Two more ideas, measured and dropped*).
//!
//! Choose it when events mostly arrive one at a time and CPU per event matters, and the handlers
//! are quick and never block (hand slow work to a work queue's workers elsewhere). Stay on the
//! multi-threaded runtime for sustained high rates, for handlers that block or run long, and for
//! many busy informers (or give them several threads).
//!
//! ### The batching window
//!
//! [`InformerThread::spawn_batching`] gives the thread a window (none with
//! [`InformerThread::spawn`], the default; at most [`MAX_BATCH_WINDOW`]): once woken, the thread
//! runs whatever is ready and, when nothing is left and the wake-up before came less than two
//! windows earlier, lets the rest of the window pass before it waits for I/O or timers again, so
//! that what arrives meanwhile is handled on the same wake-up (IT3). One wake-up then serves
//! several events, and each event (and everything else on the thread: timers, tasks spawned from
//! elsewhere, the stop when it is dropped) waits at most the window longer. The window adapts:
//! after a quieter spell the thread waits for I/O at once, so events that come further apart
//! than two windows cost neither latency nor the extra wake-up of waiting out a window that
//! gathers nothing (before it did, a 1 ms window at 200 events/s doubled the context switches
//! for the same CPU). Choose a window of several times the usual interval between events, since
//! it saves in proportion to the events it gathers, and no longer than the handlers can afford
//! to wait.
//!
//! # Where each piece lives
//!
//! In this crate: [`Pacing`] and the queue as the reflector sees it (`pacing.rs`, rules P1–P5),
//! the pop loop and its wait for handlers (`informer.rs`), the hand-backs of delivery tasks and
//! of pops no handler hears of (`listener.rs`, `processor.rs`), [`InformerThread`]
//! (`informer_thread.rs`, IT1–IT3). In the reflector: the watch loop that checks for room and
//! frees what is kept (`reflector.rs`), the watch stream that decodes in batches
//! (`watch_stream.rs`, W1–W5), the lanes and their ready signal (`decode_lane.rs`, M1–M7),
//! [`Reclaim`] (`reclaim.rs`, G1–G3) and the watch body that reads its own connection
//! (`client/watch_body.rs`, WB1).
//!
//! [`Reclaim`]: reflector::Reclaim
//! [`Reclaim::CAPACITY`]: reflector::Reclaim::CAPACITY
//! [`Reflector`]: reflector::Reflector
//! [`Reflector::with_reclaim`]: reflector::Reflector::with_reclaim
//! [`HttpListerWatcher`]: reflector::HttpListerWatcher
//! [`decode_watch_body`]: reflector::decode_watch_body
//! [`InformerThread`]: crate::InformerThread
//! [`InformerThread::spawn`]: crate::InformerThread::spawn
//! [`InformerThread::spawn_batching`]: crate::InformerThread::spawn_batching
//! [`MAX_BATCH_WINDOW`]: crate::MAX_BATCH_WINDOW
//! [`Pacing`]: crate::Pacing
//! [`DEFAULT_QUEUE_HIGH_WATER`]: crate::DEFAULT_QUEUE_HIGH_WATER
//! [`DEFAULT_HANDLER_HIGH_WATER`]: crate::DEFAULT_HANDLER_HIGH_WATER
//! [`DEFAULT_MAX_HANDLER_WAIT`]: crate::DEFAULT_MAX_HANDLER_WAIT
//! [`SharedInformerFactory::start`]: crate::SharedInformerFactory::start
//! [`SharedInformerFactory::start_on`]: crate::SharedInformerFactory::start_on
//! [`SharedInformerFactory::pacing`]: crate::SharedInformerFactory::pacing
