package cli

import (
	"fmt"

	"github.com/sandbox-run/sandbox-run/policy"
)

// setSecrets reads --secret (repeatable) into the policy's Secrets,
// replacing the profile's list.
func setSecrets(f *runFlags, p *policy.Policy) error {
	p.Secrets = nil
	for _, v := range f.secrets {
		s, err := policy.ParseSecretFlag(v)
		if err != nil {
			return err
		}
		p.Secrets = append(p.Secrets, s)
	}
	return nil
}

// setSecretIn reads --secret-in: body swaps every secret in request
// bodies too (its row comes after --secret's).
func setSecretIn(f *runFlags, p *policy.Policy) error {
	switch f.secretIn {
	case "body":
		for i := range p.Secrets {
			p.Secrets[i].InBody = true
		}
	case "header":
		for i := range p.Secrets {
			p.Secrets[i].InBody = false
		}
	default:
		return fmt.Errorf("--secret-in %q: unknown place; fix: --secret-in body (headers and query strings are always swapped)", f.secretIn)
	}
	return nil
}
