# private-apt.sh is sourced, not run: it gives the scripts that fetch
# Debian packages or sources (install-criu.sh, fetch-mpich-abi.sh,
# mpich-source.sh) one way to run apt-get on a configuration of their own,
# so that nothing is installed system-wide and the system's apt state is
# untouched.
#
# private_apt DIR KIND SUITE sets the array APT to an apt-get command that
# keeps its lists, cache and an empty dpkg status under DIR and reads one
# sources line: KIND (deb or deb-src) for SUITE of the archive the system's
# apt already uses. It prints why and returns 1 when there is no archive.
private_apt() {
	local dir=$1 kind=$2 suite=$3 uri
	uri=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null ||
		awk '/^deb / { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
	[ -n "$uri" ] || { echo "${0##*/}: no Debian archive in the system's apt sources" >&2; return 1; }
	mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
	: >"$dir/status"
	echo "$kind [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri $suite main" >"$dir/sources.list"
	APT=(apt-get -q -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o Dir::State::Lists="$dir/lists" -o Dir::State::status="$dir/status" -o Dir::Cache="$dir/cache"
		-o Debug::NoLocking=1 -o APT::Sandbox::User=root)
}
