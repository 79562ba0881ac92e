package crtest

import "gompi/frameworks/sstore/snapshot"

// RestartOn returns the coordinator of a new job of n ranks that restarts
// from sequence seq of j's reference, which must be of n ranks (a
// repartition sequence gompi-restart -np made, for a job restarted on
// another rank count), and checkpoints under the same reference.
func (j *Job) RestartOn(seq, n int) (*Job, error) {
	g, err := snapshot.ReadGlobal(j.ref)
	if err != nil {
		return nil, err
	}
	pt, err := snapshot.ChooseSeq(j.ref, g, seq)
	if err != nil {
		return nil, err
	}
	if err := pt.VerifyAll(); err != nil {
		return nil, err
	}
	nj := NewJob(n, j.ref.Dir, "")
	nj.ref, nj.from = j.ref, pt.Seq.Seq
	return nj, nil
}
