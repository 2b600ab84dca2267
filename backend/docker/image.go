package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/moby/moby/client"

	"github.com/execbox/execbox/internal/host/image"
	"github.com/execbox/execbox/sandbox"
)

// ImportOffline builds recipe r's root filesystem from the host's files
// (under opt.Root) and imports it into the engine at host as ref, applying
// the recipe's image config. No registry is contacted. It returns what went
// into the image and the new image's ID.
func ImportOffline(ctx context.Context, host string, r image.Recipe, ref string, opt image.Options) (image.Stats, string, error) {
	cli, addr, err := NewClient(host)
	if err != nil {
		return image.Stats{}, "", err
	}
	defer cli.Close()
	pr, pw := io.Pipe()
	type built struct {
		st  image.Stats
		err error
	}
	done := make(chan built, 1)
	go func() {
		st, err := image.Build(pw, r, opt)
		pw.CloseWithError(err)
		done <- built{st, err}
	}()
	resp, err := cli.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: r.Changes, Message: "execbox image build " + r.Name + " --offline"})
	if err != nil {
		pr.CloseWithError(err)
		b := <-done
		if b.err != nil {
			return b.st, "", sandbox.Errorf(sandbox.ErrInternal, "image_build_failed", "building the %s root filesystem: %w", r.Name, b.err)
		}
		return b.st, "", importErr(addr, err)
	}
	defer resp.Close()
	id, serr := readStream(resp, nil)
	pr.Close()
	b := <-done
	switch {
	case b.err != nil:
		return b.st, "", sandbox.Errorf(sandbox.ErrInternal, "image_build_failed", "building the %s root filesystem: %w", r.Name, b.err)
	case serr != nil:
		return b.st, "", sandbox.Errorf(sandbox.ErrInternal, "image_import_failed", "importing %s into the engine at %s: %w", ref, addr, serr)
	}
	return b.st, id, nil
}

// BuildDockerfile builds image name from its Dockerfile (see
// internal/host/image) with the engine at host (which pulls the base image),
// tagged ref; the build output goes to progress.
func BuildDockerfile(ctx context.Context, host, name, ref string, progress io.Writer) (string, error) {
	bctx, err := image.BuildContext(name)
	if err != nil {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "image_unknown", "%w", err)
	}
	cli, addr, err := NewClient(host)
	if err != nil {
		return "", err
	}
	defer cli.Close()
	resp, err := cli.ImageBuild(ctx, strings.NewReader(string(bctx)), client.ImageBuildOptions{
		Tags: []string{ref}, Remove: true, ForceRemove: true, NetworkMode: "default",
		Labels: map[string]string{"io.execbox.image": name},
	})
	if err != nil {
		return "", importErr(addr, err)
	}
	defer resp.Body.Close()
	id, err := readStream(resp.Body, progress)
	if err != nil {
		return "", sandbox.Errorf(sandbox.ErrInternal, "image_build_failed", "building %s with the engine at %s: %w", ref, addr, err)
	}
	return id, nil
}

func importErr(addr string, err error) error {
	if engineDown(err) {
		return &sandbox.Error{Kind: sandbox.ErrUnavailable, Code: "engine_unavailable", Err: err, Msg: fmt.Sprintf(
			"the docker engine at %s is not answering (%s); start dockerd or point docker.host / DOCKER_HOST at a running engine", addr, downCause(err))}
	}
	return sandbox.Errorf(sandbox.ErrInternal, "docker_failed", "talking to the engine at %s: %w", addr, err)
}

// readStream reads the engine's JSON progress stream to its end: the
// build's "stream" lines go to progress, an "error" ends it with that
// error, and the image ID (an import's last "status", a build's aux ID) is
// returned.
func readStream(r io.Reader, progress io.Writer) (string, error) {
	dec := json.NewDecoder(r)
	var id string
	for {
		var m struct {
			Status      string `json:"status"`
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
			Aux *struct {
				ID string `json:"ID"`
			} `json:"aux"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return id, nil
			}
			return id, fmt.Errorf("reading the engine's reply: %w", err)
		}
		switch {
		case m.Error != "":
			return id, errors.New(m.Error)
		case m.ErrorDetail != nil && m.ErrorDetail.Message != "":
			return id, errors.New(m.ErrorDetail.Message)
		case m.Aux != nil && m.Aux.ID != "":
			id = m.Aux.ID
		case strings.HasPrefix(m.Status, "sha256:"):
			id = strings.TrimSpace(m.Status)
		}
		if progress != nil && m.Stream != "" {
			io.WriteString(progress, m.Stream)
		}
	}
}
