// Package mpi is gompi's message-passing library: MPI-style ranks,
// communicators, point-to-point messages with MPI's matching rules, and
// collectives built over them, on top of the BTL transports (tcp, uds, sm).
//
// # Using it
//
//	if err := mpi.Init(ctx); err != nil { ... }
//	defer mpi.Finalize()
//	w := mpi.World()
//	w.Send(buf, (w.Rank()+1)%w.Size(), 0)
//	st, err := w.Recv(buf, mpi.AnySource, mpi.AnyTag)
//	err = mpi.Allreduce(w, local, global, mpi.Sum)
//
// Point-to-point calls take []byte; SendT, RecvT, BcastT, Allreduce and the
// other generic helpers take slices of any Numeric type. A Datatype
// describes MPI's type maps without generics (the predefined TypeInt32 ...
// TypeDoubleInt; TypeContiguous, TypeVector, TypeHvector, TypeIndexed,
// TypeHindexed, TypeIndexedBlock, TypeHindexedBlock, TypeStruct,
// TypeSubarray, TypeResized, Dup), and a Buf is count elements of one in
// memory: SendBuf, IsendBuf, RecvBuf, IrecvBuf, BcastBuf, GathervBuf,
// ScattervBuf, AllgathervBuf, AlltoallvBuf and Alltoallw move its packed
// bytes (a dense type without a copy), Pack and Unpack convert,
// Status.CountOf counts. Reductions are predefined ops (Sum ... Bxor, MinLoc and MaxLoc on
// the pair types) by element kind (OpReduction) or user functions
// (UserReduction, commutative or not: a non-commutative one is combined in
// rank order), run by ReduceBytes, AllreduceBytes and their non-blocking
// forms on bytes as they lie in memory. Beyond Send and Isend there are
// Ssend/Issend (complete once a receive matched the message), Rsend, and
// Bsend/Ibsend over Proc.BufferAttach/BufferDetach; persistent requests
// (SendInit, SsendInit, RsendInit, BsendInit, RecvInit, Prequest.Start,
// Startall); Mprobe/Improbe, whose Message only its Recv/Irecv can
// receive; Request.Cancel of a posted receive (Status.Cancelled);
// Testany, Testsome and Waitsome. Messages to or from ProcNull complete at
// once, moving nothing. Comm.Group gives a Group (Incl, Excl, RangeIncl,
// RangeExcl, Union, Intersection, Difference, TranslateRanks, Compare);
// Comm.Create makes a communicator of a group, Comm.SplitShared one per
// node, Comm.Compare compares communicators. CartCreate, GraphCreate and
// DistGraphCreateAdjacent make communicators carrying a virtual topology
// (Comm.Topology, TopoTest; Cart's Coords, Rank, Shift and CartSub,
// Graph.Neighbors, DimsCreate), without reordering ranks. Comm.IntercommCreate
// makes an intercommunicator between two disjoint groups (point-to-point
// naming the remote group, Barrier, Bcast with Root, RemoteGroup, Merge,
// Dup, Split, Free; other collectives fail with ErrInter: intercomm.go). A receive matches
// the first message, in arrival order, from its source (or AnySource) with
// its tag (or AnyTag) on its communicator; messages between two ranks on
// one communicator never overtake each other. Collectives run on a context
// of their own per communicator, so they never match point-to-point
// traffic, and are numbered per communicator so non-blocking ones may
// overlap. Every collective has a non-blocking form (Ibarrier, Ibcast,
// Igather(v), Iscatter(v), Iallgather(v), Ialltoall(v,w), IreduceBytes,
// IallreduceBytes, IreduceScatter(Block), Iscan, Iexscan). Beyond Barrier,
// Bcast, Gather(v), Scatter(v), Allgather, Alltoall, Reduce and Allreduce
// there are Allgatherv, Alltoallv, Alltoallw (a Buf per peer),
// ReduceScatter, ReduceScatterBlock, Scan and Exscan; counts and
// displacements are in bytes, and MPI_IN_PLACE is the receive region passed
// as send.
// Barrier, Bcast, Reduce and Allreduce run on the coll components the
// rank selected (frameworks/coll: basic's flat algorithms, and han's
// hierarchical ones on a communicator spanning several nodes with more
// than one member on some node, in a job without C/R);
// Comm.CollComponents says which.
//
// Blocking calls (Send, Recv, Probe, Wait, collectives) take no context:
// they end with an error wrapping ErrStopped when the Proc stops (Finalize,
// or the context given to Init ends). RecvCtx, ProbeCtx and
// Request.WaitCtx bound a single wait; any blocking operation can be
// bounded by starting its non-blocking form and calling WaitCtx. A lost
// peer makes operations that depend on it fail with an error wrapping
// ErrProcFailed (RankOf names the rank).
//
// # The runtime boundary
//
// A rank learns who it is from a Bootstrap: rank, size, job id, node name,
// the job's MCA values with the framework registries they were resolved
// against, a modex (an all-gather of key/value maps through the runtime)
// and Abort. mpi.Init takes it from the runtime's rank client
// (rte/rankclient), which talks to the node's gompid when gompirun started
// the rank, and otherwise makes the program a singleton, rank 0 of 1, so
// `go run ./examples/heat` works without a launcher. When the Bootstrap can
// also finalize (the rank client can), Finalize ends with the runtime's
// finalize handshake, so the job knows the rank ended on purpose.
// InitWith(ctx, bootstrap, options) starts a Proc explicitly; several
// Procs can live in one process (package mpitest runs whole jobs in a
// test).
//
// At Init each selected BTL listens and its address goes into the modex
// under "btl_<component>", with the node under "node". For each peer the
// highest-priority module that reaches it is chosen (sm on the same node,
// else tcp; uds when sm is excluded). Connections open on the first send, one per direction:
// a rank writes on the connection it dialed and a reader goroutine per
// accepted connection takes every frame off the wire as it arrives, so no
// send waits for the receiving application. The runtime reports ranks it
// saw die with Proc.MarkFailed.
//
// The application hears of every failure the process learns of (the
// runtime's report, a broken connection), even while it computes, through
// NotifyFailures, in the manner of os/signal.Notify (events.go): each
// failed rank once per channel, never blocking the library.
//
//	failures := make(chan mpi.Failure, 1)
//	mpi.NotifyFailures(failures)
//	for {
//		select {
//		case f := <-failures:
//			log.Printf("rank %d failed: %v", f.Rank, f.Cause) // recover: Shrink
//		default:
//			step() // compute, no MPI call needed
//		}
//	}
//
// # Waiting
//
// While a goroutine is blocked waiting for a message, the reader
// goroutines busy-poll their sockets or rings for a short while (btl_tcp_poll,
// btl_uds_poll, btl_sm_poll; 50µs by default) before sleeping, and a writer facing a
// full socket buffer retries as long: waking a sleeping thread costs more
// than a small message takes. With more than one Go processor per rank
// and a core for each, the waiter itself polls its request as long,
// yielding between looks, before it parks: the reader goroutine that
// completes it from another thread then finds it runnable rather than
// asleep. On an oversubscribed node nothing polls. Latency is best with one Go
// processor per rank (GOMAXPROCS=1 when ranks fill a node's cores), the
// way Open MPI binds one rank per core: the launcher sets GOMAXPROCS to
// max(1, cores / ranks on the node) (plm_base_gomaxprocs).
//
// # Checkpoint/restart
//
// Everything the application holds is a virtual handle owned by the
// library. Communicator handles (Comm.Handle) are context ids agreed by the
// members from a per-process counter, so the same creation sequence gives
// the same handles; every Dup, Split, Free, IntercommCreate and Merge is
// recorded with its result
// in the creation log (Proc.CreationLog), Create, SplitShared and the
// topology constructors as the Splits they are. Every message sent and every
// message taken off a transport passes through one function each, where
// the coordination protocol is told (Sent, Received) with its
// per-(context, source, destination) sequence number. InitWith installs
// the protocol the job's parameters select (crcp; -am ft-enable-cr selects
// bkmrk); with crcp=none nothing is installed and the message path costs
// one pointer load. SetCRCP installs one by hand. Proc.Channels and
// Proc.ChannelsAt give a protocol its bookmark exchange, drain and
// agreement; ChannelsAt numbers them by checkpoint, so a checkpoint given
// up half-way never disturbs the next. The exchange and the agreement
// travel over a binomial tree of the ranks rooted at rank 0 (the tree of
// the flat Reduce and Bcast): 2(N-1) messages and 2*floor(log2 N) steps
// each, whatever the traffic. Only non-zero counts travel, each only as
// far up as the subtree holding its destination, so the bookmarks of a
// program whose ranks talk to a few others add bytes, not messages, and a
// rank that has only received (or not even that yet) learns what it must
// drain. A checkpoint opens no connection but the tree's
// (Proc.ControlFrames counts what it wrote). Proc.SaveState returns the library's
// own state (unexpected and drained messages, sequence numbers, totals,
// the creation log, collective counts; not the library's control traffic)
// and WithState, or a Bootstrap that implements Restorer, restores it at
// Init: communicators are rebuilt from the log with the same handles and
// the saved messages are received first, in their order.
//
// # Suspending: quiet for a dump from outside
//
// Proc.Suspend(ctx, epoch) and Proc.Resume(ctx) let a program with no C/R
// code be dumped by CRIU from outside. The runtime's link calls Suspend
// on a goroutine of its own, on every rank, with the same epoch (larger
// than any earlier one), whatever the application's goroutines are doing:
// computing, blocked in Recv or Wait, inside a blocking or non-blocking
// collective, with requests outstanding. The rank closes a gate that every
// communicator call passes (Comm methods and the collectives check their
// communicator first) and that every message of the application or a
// collective enters on its way out; calls already past it run on until
// they wait for a message, which holds nothing. Once the sends that passed
// have reached the transport (queued ones too), the ranks exchange their
// per-peer message counts on the library's control context, over the
// tree above (bkmrk's bookmarks: every context the library sends on,
// collectives' included), and each waits until it has taken off its
// connections what every peer counted; the reader goroutines put it in the unexpected queue or a
// posted receive. That is the way of bkmrk (and of a job with no
// protocol installed). With crcp flag (its module's TransparentQuiesce
// says which, crcp.Transparent; another protocol is refused, naming the
// two that work), each rank instead writes a flag frame behind its last
// frame down every connection it opened and reads each connection to it
// up to that peer's flag: connections are FIFO, so nothing is counted,
// only which ranks flag which is exchanged over the tree, and the flags
// bypass the matching engine. Every rank of a job selects
// the same protocol from the job's parameters. Then the rank closes every
// listener (the uds socket file goes) and connection it owns (an sm
// connection unmaps its shared segment) and waits
// for its readers to end: Suspend returns once this rank is quiet, with
// its totals and the frames the protocol cost (Quiet). A peer closes its
// connections after its flag or its message of the tree, the last frame
// it sent on each: a connection ending just after it is no failure of the
// peer, as a
// migration's moving ranks are none (migrate.go).
//
// Resume listens again (tcp picks a new port), exchanges the new addresses
// through the runtime (a Bootstrap that implements Rejoiner: Remodex once
// per epoch), points every peer at its new endpoint as PeersMoved does and
// opens the gate. Connections are dialed again on the next send, with the
// hello. Communicators, requests and sequence numbers go on: blocked
// receives and outstanding requests complete normally, each message once
// and in order. A process restored from a dump of a suspended one (same
// memory, in a new process, its sockets already closed) resumes with the
// same call.
//
// Limits: a Proc of more than one rank suspends only over a runtime that
// implements Rejoiner (package mpitest's does; the rank client does not
// yet, and Suspend says so with errors.ErrUnsupported) and transports that
// listen again (btl.Relistener: tcp, uds and sm). A Suspend given up (its ctx
// ended, a peer failed) before every rank's counts or flags arrived leaves
// this rank running (a flag that comes late is harmless: the next
// suspension's carry a larger tag); when some ranks completed and others
// gave up, the completed
// ones must be resumed, which needs every rank's Remodex: the coordinator
// gives up a suspension on every rank or on none. Suspend refuses a rank
// that is finalizing or stopped, or a job with a failed or finalized rank.
// Resume takes the node name from the Bootstrap again, so a process
// restored on another node reaches its peers over the transports that fit
// the new placement (sm within a node, tcp between); the selected
// transports and the data-plane secret stay those of Init (ranks restored
// together share it). The runtime's own connection (the rank client's) is
// the runtime's to close and reopen.
// Agreements (Agree, Shrink) and cr's bookmark exchanges travel on the
// control context, which the gate does not hold: they must not run during
// a suspension.
//
// # Agreement: Agree, Iagree, Shrink, Ishrink
//
// Comm.Agree (ULFM's MPIX_Comm_agree) is a fault-tolerant collective: it
// returns the bitwise AND of the flags of the members that take part, the
// same at every survivor, and an error wrapping ErrProcFailed at every
// survivor or at none, at all of them when the members agreed that some
// member failed that not every survivor acknowledged (Comm.AckFailed before
// the call). It works on a revoked communicator (it travels on the control
// context). Failure-free it takes 4·⌊log2 n⌋ message rounds and 4(n-1)
// messages (a binomial tree swept twice: propose, then decide); with
// failures it falls back to a recovery of O(n²) messages that still
// terminates and agrees; agreemachine.go documents the algorithm and why
// every survivor decides the same, even when a rank decides and dies at
// once. A rank that decided answers late queries after its call returned
// (its decision is kept until the next agreement on the communicator is
// decided; a freed communicator keeps only decided ones). Failures are
// found by broken connections, failed sends, the runtime's reports, and a
// ping to the members a stalled agreement waits for.
//
//	ok := 1
//	if err := step(); err != nil {
//		ok = 0
//	}
//	all, err := c.Agree(ok) // all == 1: every member's step worked
//	if errors.Is(err, mpi.ErrProcFailed) {
//		// a member failed: acknowledge, shrink, go on
//	}
//
// Comm.Iagree is its non-blocking form: it reads *flag at the call and
// writes the agreed value there before the request completes.
//
//	req, _ := c.Iagree(&flag)
//	_, err := req.Wait() // flag is the AND over the survivors
//
// Comm.Shrink runs the same agreement on the failed set (every failure a
// member knows of, acknowledged or not) and the largest next free context
// id, and returns the communicator of the others, the same at every
// survivor (its creation log entry is OpShrink; a restart replays it).
// Comm.Ishrink starts one and sets *newcomm when its request completes.
//
//	nc, err := c.Shrink()
//	req, _ := c.Ishrink(&nc) // ... req.Wait()
//
// When the Bootstrap is also a snapc.AppLink (the runtime's rank client),
// the library answers the job's checkpoint coordinator until package cr
// takes the requests over (HandleApp): a query is told the program has no
// safe points, a target waits for cr or is refused at Finalize. When the
// link says the start is a restart, Init reads the local snapshot's
// library.state (checked against the snapshot's metadata, ReadLibraryState)
// and replays: the program's Dup, Split and Free calls get the
// communicators of the log back, in order and without communicating, until
// cr reaches the restart point (EndReplay); a call that differs from the
// log is an error naming both.
//
// # Fault tolerance (ULFM)
//
// Under errmgr sustain the job runs on past a failed rank, and the
// library offers ULFM's interface (Open MPI's and MPICH's MPIX_Comm_*)
// for the program to recover. Operations that involve a failed process
// fail with an error wrapping ErrProcFailed (RankOf names it).
//
// Comm.Revoke (MPIX_Comm_revoke) is how one member tells all the others
// to stop using a communicator: every pending and later operation on it,
// at every live member, fails with an error wrapping ErrRevoked (posted
// receives, probes, Ssend waiting for its match, started persistent
// requests, blocking and non-blocking collectives), and so does creating
// a communicator from it; Shrink, Agree, GetFailed, AckFailed, IsRevoked,
// Free and the queries still work. It is not collective: the revoking
// process sends a notice to every other member, and a member that got
// the notice forwards it to all the others once the member it got it
// from fails, so it reaches every live member even when the revoker dies
// midway (revoke.go: n-1 frames and one frame's latency without
// failures). Messages that arrive on a revoked communicator are dropped.
// Comm.IsRevoked (MPIX_Comm_is_revoked) tells whether it happened.
//
//	if _, err := c.Recv(buf, left, tag); errors.Is(err, mpi.ErrProcFailed) {
//		c.Revoke() // the others leave their pending calls on c too
//	}
//	if c.IsRevoked() {
//		nc, err := c.Shrink() // the survivors, on a new communicator
//		c.Free()
//	}
//
// Comm.GetFailed (MPIX_Comm_get_failed) is the group of c's members this
// process knows failed, in the order it learned of them; Comm.AckFailed
// (MPIX_Comm_ack_failed) acknowledges the first n of them:
//
//	failed, _ := c.GetFailed()
//	acked, _ := c.AckFailed(failed.Size())
//
// AnySource receives follow ULFM's rules. While c has failures the
// application has not acknowledged, a blocking AnySource Recv or Probe
// (and Iprobe) fails with ErrProcFailed; once AckFailed covers them, they
// wait normally again. A non-blocking AnySource Irecv stays posted when a
// member fails: Wait, Test, Waitany, Testany, Testsome and Waitsome
// report an error wrapping ErrProcFailedPending (at once, or when the
// failure happens during the wait) and leave it active, so it can still
// complete with a message, be waited on normally after AckFailed, or be
// cancelled:
//
//	r, _ := c.Irecv(buf, mpi.AnySource, tag)
//	_, err := r.Wait()
//	if errors.Is(err, mpi.ErrProcFailedPending) {
//		failed, _ := c.GetFailed()
//		c.AckFailed(failed.Size()) // the failure is known: go on waiting
//		_, err = r.Wait()
//	}
//
// Receives naming a failed source fail with ErrProcFailed, and
// collectives fail once any member failed, acknowledged or not.
// Comm.Shrink builds the communicator of the survivors (see its doc and
// the agreement's).
//
// A checkpoint is refused while a communicator is revoked (SaveState, and
// the suspension of a transparent checkpoint, fail with an error wrapping
// ErrRevoked naming the communicator): a restarted job could not hold the
// revocation. Shrink it and free it, then checkpoint. gompi does not
// revoke intercommunicators (ErrInter).
package mpi
