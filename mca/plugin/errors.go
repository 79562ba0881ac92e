package plugin

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"gompi/frameworks/crs"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/filem"
	"gompi/frameworks/plm"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
	pb "gompi/mca/plugin/proto"
)

// sentinels maps the wire names of error values to the values, in the
// order their gRPC code is chosen (the first one an error wraps decides).
var sentinels = []struct {
	id   pb.Sentinel
	err  error
	code codes.Code
}{
	{pb.Sentinel_SENTINEL_CANCELED, context.Canceled, codes.Canceled},
	{pb.Sentinel_SENTINEL_DEADLINE_EXCEEDED, context.DeadlineExceeded, codes.DeadlineExceeded},
	{pb.Sentinel_SENTINEL_NOT_CHECKPOINTABLE, crs.ErrNotCheckpointable, codes.FailedPrecondition},
	{pb.Sentinel_SENTINEL_NO_PROCESS, crs.ErrNoProcess, codes.NotFound},
	{pb.Sentinel_SENTINEL_NO_SNAPSHOT, crs.ErrNoSnapshot, codes.NotFound},
	{pb.Sentinel_SENTINEL_UNREACHABLE, filem.ErrUnreachable, codes.Unavailable},
	{pb.Sentinel_SENTINEL_NOT_EXIST, fs.ErrNotExist, codes.NotFound},
	{pb.Sentinel_SENTINEL_SKIP, mca.ErrSkip, codes.FailedPrecondition},
	{pb.Sentinel_SENTINEL_DISABLED, sstore.ErrDisabled, codes.FailedPrecondition},
	{pb.Sentinel_SENTINEL_CORRUPT, snapshot.ErrCorrupt, codes.DataLoss},
	{pb.Sentinel_SENTINEL_JOB_OVER, errmgr.ErrJobOver, codes.FailedPrecondition},
	{pb.Sentinel_SENTINEL_NO_CHECKPOINT, errmgr.ErrNoCheckpoint, codes.FailedPrecondition},
	{pb.Sentinel_SENTINEL_MIGRATION_ABANDONED, errmgr.ErrMigrationAbandoned, codes.Aborted},
	{pb.Sentinel_SENTINEL_LAUNCH, plm.ErrLaunch, codes.Unknown},
	{pb.Sentinel_SENTINEL_SNAPC_DISABLED, snapc.ErrDisabled, codes.FailedPrecondition},
	{pb.Sentinel_SENTINEL_NOT_COORDINATOR, snapc.ErrNotCoordinator, codes.FailedPrecondition},
	{pb.Sentinel_SENTINEL_REFUSED, snapc.ErrRefused, codes.FailedPrecondition},
	{pb.Sentinel_SENTINEL_FAILED, snapc.ErrFailed, codes.Aborted},
	{pb.Sentinel_SENTINEL_NO_APP, snapc.ErrNoApp, codes.Unavailable},
}

func sentinelsOf(err error) []pb.Sentinel {
	var out []pb.Sentinel
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			out = append(out, s.id)
		}
	}
	return out
}

func sentinelErrors(ids []pb.Sentinel) []error {
	var out []error
	for _, id := range ids {
		for _, s := range sentinels {
			if s.id == id {
				out = append(out, s.err)
				break
			}
		}
	}
	return out
}

// toStatus turns a component's error into a gRPC status error that carries
// its text, the sentinels it wraps, its filem.TransferErrors and its
// plm.ExitError.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	d := detailOf(err)
	code := codes.Unknown
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			code = s.code
			break
		}
	}
	// The status text must be valid UTF-8; the exact text is in the detail.
	text := strings.ToValidUTF8(err.Error(), "\uFFFD")
	st, derr := status.New(code, text).WithDetails(d)
	if derr != nil {
		return status.Error(code, text)
	}
	return st.Err()
}

// detailOf is what crosses the bridge of a component's error: its text,
// the sentinels it wraps, its filem.TransferErrors and its plm.ExitError.
func detailOf(err error) *pb.ErrorDetail {
	d := &pb.ErrorDetail{Message: []byte(err.Error()), Sentinels: sentinelsOf(err)}
	for _, te := range transferErrors(err) {
		var inner []byte
		if te.Err != nil {
			inner = []byte(te.Err.Error())
		}
		d.Transfers = append(d.Transfers, &pb.TransferFailure{
			Op: te.Op, Src: []byte(te.Src), Dst: []byte(te.Dst), Message: inner, Sentinels: sentinelsOf(te.Err)})
	}
	var ee *plm.ExitError
	if errors.As(err, &ee) {
		d.LaunchExit = &pb.LaunchExit{Node: ee.Node, What: ee.What, Pid: int64(ee.PID), Code: int32(ee.Code),
			Signal: int32(ee.Signal), Said: []byte(ee.Said)}
		if ee.Err != nil {
			d.LaunchExit.Err = []byte(ee.Err.Error())
		}
	}
	return d
}

// transferErrors returns every *filem.TransferError in err's tree, in order,
// without looking inside them.
func transferErrors(err error) []*filem.TransferError {
	var out []*filem.TransferError
	var walk func(error, int)
	walk = func(err error, depth int) {
		if err == nil || depth > 100 {
			return
		}
		if te, ok := err.(*filem.TransferError); ok {
			out = append(out, te)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e, depth+1)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap(), depth+1)
		}
	}
	walk(err, 0)
	return out
}

// remoteError is an error a component returned on the other side of the
// bridge: its text as written there, and the values errors.Is and
// errors.As can find in it.
type remoteError struct {
	msg   string
	wraps []error
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Unwrap() []error { return e.wraps }

// fromDetail rebuilds a component's error from the detail of its status.
func fromDetail(d *pb.ErrorDetail) error {
	wraps := sentinelErrors(d.GetSentinels())
	for _, tf := range d.GetTransfers() {
		wraps = append(wraps, &filem.TransferError{Op: tf.GetOp(), Src: string(tf.GetSrc()), Dst: string(tf.GetDst()),
			Err: &remoteError{msg: string(tf.GetMessage()), wraps: sentinelErrors(tf.GetSentinels())}})
	}
	if le := d.GetLaunchExit(); le != nil {
		ee := &plm.ExitError{Node: le.GetNode(), What: le.GetWhat(), PID: int(le.GetPid()), Code: int(le.GetCode()),
			Signal: syscall.Signal(le.GetSignal()), Said: string(le.GetSaid())}
		if le.GetErr() != nil {
			ee.Err = &remoteError{msg: string(le.GetErr())}
		}
		wraps = append(wraps, ee)
	}
	return &remoteError{msg: string(d.GetMessage()), wraps: wraps}
}

// componentError returns the component's error carried by a call's error,
// or nil when the error came from the transport (no ErrorDetail).
func componentError(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if ed, ok := d.(*pb.ErrorDetail); ok {
			return fromDetail(ed)
		}
	}
	return nil
}
