package ociimage

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrAbsent marks an image that is not in local storage (and no pull was
// asked for); ErrDigest an image whose digest is not the pinned one.
var (
	ErrAbsent = errors.New("ociimage: image not in local storage")
	ErrDigest = errors.New("ociimage: digest differs from the pinned one")
)

// Error is a refusal or a failure with what, why and the fix. It matches
// ErrAbsent or ErrDigest with errors.Is when it is one.
type Error struct {
	What, Why, Fix string
	kind           error
}

func (e *Error) Error() string { return e.What + ": " + e.Why + "; fix: " + e.Fix }

// Is reports whether e is target's kind.
func (e *Error) Is(target error) bool { return e.kind != nil && e.kind == target }

// Ref is an image reference as given: a name podman resolves, and the
// digest it is pinned to ("sha256:" and 64 hex digits), if any.
type Ref struct {
	Name   string
	Digest string
}

func (r Ref) String() string {
	if r.Digest == "" {
		return r.Name
	}
	return r.Name + "@" + r.Digest
}

// ParseRef splits NAME[@sha256:HEX]. It refuses an empty name, one that
// podman would read as a flag, and bytes no reference holds.
func ParseRef(s string) (Ref, error) {
	bad := func(why string) (Ref, error) {
		return Ref{}, &Error{What: "--image " + fmt.Sprintf("%q", s), Why: why, Fix: "pass an image reference such as localhost/tool:1 or docker.io/library/alpine@sha256:…"}
	}
	if s == "" || strings.HasPrefix(s, "-") {
		return bad("is not an image reference")
	}
	if strings.ContainsFunc(s, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
		return bad("holds a space or a control character")
	}
	name, dig, pinned := strings.Cut(s, "@")
	if name == "" {
		return bad("names no image")
	}
	if pinned && !validDigest(dig) {
		return bad("its digest is not sha256: and 64 lowercase hex digits")
	}
	return Ref{Name: name, Digest: dig}, nil
}

func validDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	return strings.Trim(h, "0123456789abcdef") == ""
}

// Info is what podman says of a stored image.
type Info struct {
	ID          string   // the config digest's hex, podman's image ID
	Digest      string   // the manifest digest, sha256:…
	RepoDigests []string // NAME@sha256:… as pulled
	Env         []string // the image's configured environment
}

// parseInspect reads `podman image inspect` output (a JSON array of one).
func parseInspect(b []byte) (Info, error) {
	var out []struct {
		ID          string   `json:"Id"`
		Digest      string   `json:"Digest"`
		RepoDigests []string `json:"RepoDigests"`
		Config      struct {
			Env []string `json:"Env"`
		} `json:"Config"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return Info{}, fmt.Errorf("podman image inspect: %w", err)
	}
	if len(out) != 1 || len(out[0].ID) != 64 || strings.Trim(out[0].ID, "0123456789abcdef") != "" {
		return Info{}, errors.New("podman image inspect: not one image with a sha256 ID")
	}
	i := out[0]
	return Info{ID: i.ID, Digest: i.Digest, RepoDigests: i.RepoDigests, Env: i.Config.Env}, nil
}

// Matches reports whether digest d names this image: its manifest
// digest, one of its repository digests, or its ID.
func (i Info) Matches(d string) bool {
	if d == "" {
		return false
	}
	if d == i.Digest || d == "sha256:"+i.ID {
		return true
	}
	for _, rd := range i.RepoDigests {
		if _, x, ok := strings.Cut(rd, "@"); ok && x == d {
			return true
		}
	}
	return false
}
