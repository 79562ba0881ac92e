package hnp

import "fmt"

// event is what the job's actor takes from the rest of gompirun: daemon
// sessions, tools, the ErrMgr stack's policies, the SnapC coordinator and
// the goroutines the job starts. The set is closed (the unexported
// method): every event is listed below, and handle panics on any other,
// since one it does not know is a programming error, not input.
type event interface{ jobEvent() }

func (evAttach) jobEvent()         {}
func (evMsg) jobEvent()            {}
func (evStreamEnd) jobEvent()      {}
func (evBroken) jobEvent()         {}
func (evLaunchExit) jobEvent()     {}
func (evFault) jobEvent()          {}
func (evNotifyFailed) jobEvent()   {}
func (evRanksOf) jobEvent()        {}
func (evRollback) jobEvent()       {}
func (evRollbackView) jobEvent()   {}
func (evStatus) jobEvent()         {}
func (evMigrate) jobEvent()        {}
func (evMigSaved) jobEvent()       {}
func (evNodes) jobEvent()          {}
func (evPredict) jobEvent()        {}
func (evRecover) jobEvent()        {}
func (evSnapcSend) jobEvent()      {}
func (evTerminate) jobEvent()      {}
func (evStopped) jobEvent()        {}
func (evRankCheckpoint) jobEvent() {}
func (evLocate) jobEvent()         {}
func (evTell) jobEvent()           {}

// unknownEvent is the panic of handle for an event it has no case for.
func unknownEvent(e event) string {
	return fmt.Sprintf("hnp: the job has no handler for event %T", e)
}
