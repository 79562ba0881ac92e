package filem

import (
	"fmt"
	"strconv"

	"gompi/mca"
)

// The sftp component's name and the parameters of it that a remote
// location's inference and the per-user snapshot index set
// (components/filem/sftp registers them; this package's tests check that
// it does under these names).
const (
	SFTP                = "sftp"
	ParamSFTPUser       = Name + "_" + SFTP + "_user"
	ParamSFTPPort       = Name + "_" + SFTP + "_port"
	ParamSFTPKnownHosts = Name + "_" + SFTP + "_known_hosts"
	ParamSFTPIdentity   = Name + "_" + SFTP + "_identity"
)

// Infer returns the settings that select the FileM reaching l, laid over
// vals: none for a location on this node; for a remote one, filem = sftp
// (its host, user and port travel in each transfer's Remote), unless vals
// choose a FileM explicitly, which wins. Where sftp is inferred or chosen,
// a user or port that l names and that an explicit filem_sftp_user or
// filem_sftp_port contradicts is an error naming both: which one was meant
// cannot be guessed.
func Infer(l Location, vals *mca.Values) ([]mca.Setting, error) {
	if l.Host == "" {
		return nil, nil
	}
	var out []mca.Setting
	chosen := vals.Get(Name)
	if chosen.Origin.Source.Explicit() {
		if chosen.Value != SFTP {
			return nil, nil
		}
	} else {
		out = append(out, mca.Setting{Name: Name, Value: SFTP, Origin: mca.Origin{Source: mca.SourceInferred, Where: "from " + l.String()}})
	}
	conflict := func(param, what, inURL string) error {
		s := vals.Get(param)
		if !s.Origin.Source.Explicit() || inURL == "" || s.Value == inURL {
			return nil
		}
		return fmt.Errorf("filem: %s names %s %s, but %s = %s (from %s): drop one of them", l, what, inURL, param, s.Value, s.Origin)
	}
	port := ""
	if l.Port != 0 {
		port = strconv.Itoa(l.Port)
	}
	if err := conflict(ParamSFTPUser, "user", l.User); err != nil {
		return nil, err
	}
	if err := conflict(ParamSFTPPort, "port", port); err != nil {
		return nil, err
	}
	return out, nil
}
