package gitrepo

import "strconv"

// AppendEnvConfig adds keys and vals to the git config that env already
// carries in GIT_CONFIG_COUNT/KEY/VALUE (the caller's identity, devenv),
// after it: one channel, several writers, none overwriting another.
func AppendEnvConfig(env map[string]string, keys, vals []string) {
	if len(keys) == 0 {
		return
	}
	n, err := strconv.Atoi(env["GIT_CONFIG_COUNT"])
	if err != nil || n < 0 {
		n = 0
	}
	for i := range keys {
		env["GIT_CONFIG_KEY_"+strconv.Itoa(n+i)] = keys[i]
		env["GIT_CONFIG_VALUE_"+strconv.Itoa(n+i)] = vals[i]
	}
	env["GIT_CONFIG_COUNT"] = strconv.Itoa(n + len(keys))
}

// TakeEnvConfig returns the git config that env carries in
// GIT_CONFIG_COUNT/KEY/VALUE, and removes it from env.
func TakeEnvConfig(env map[string]string) (keys, vals []string) {
	n, err := strconv.Atoi(env["GIT_CONFIG_COUNT"])
	delete(env, "GIT_CONFIG_COUNT")
	if err != nil || n < 0 || n > 1024 {
		return nil, nil
	}
	for i := range n {
		k, v := "GIT_CONFIG_KEY_"+strconv.Itoa(i), "GIT_CONFIG_VALUE_"+strconv.Itoa(i)
		keys, vals = append(keys, env[k]), append(vals, env[v])
		delete(env, k)
		delete(env, v)
	}
	return keys, vals
}
