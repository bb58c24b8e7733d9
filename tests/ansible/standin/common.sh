# Shared prelude of the stand-in .run packages (tests/ansible/_standin.py prepends it). Real Ascend .run
# packages are makeself archives whose embedded install script takes these options; the stand-ins accept
# the same ones, refuse others with exit code 1 the way the vendor's scripts do, and append one line per
# action to the vendor's install log so a test can read the order in which packages were installed.
set -uo pipefail
STANDIN_LOG=/var/log/ascend_seclog/ascend_install.log
mode=""
install_path="/usr/local/Ascend"
install_for_all=no
quiet=no
scene=""
log() {
  mkdir -p "$(dirname "$STANDIN_LOG")"
  echo "$(date '+%Y-%m-%d %H:%M:%S.%N') package=$PACKAGE version=$VERSION action=$mode path=$install_path for_all=$install_for_all $*" >>"$STANDIN_LOG"
}
say() { [[ $quiet == yes ]] || echo "$@"; }
fail() {
  echo "[ERROR]$*" >&2
  exit 1
}
for arg in "$@"; do
  case "$arg" in
    --full | --install | --upgrade | --uninstall | --devel | --run)
      [[ -z $mode ]] || fail "ERR_NO:0x0004;ERR_DES:only one of --full/--install/--upgrade/--uninstall allowed"
      mode="${arg#--}"
      ;;
    --install-for-all) install_for_all=yes ;;
    --quiet) quiet=yes ;;
    --nox11 | --noexec-cleanup) ;;
    --install-path=*) install_path="${arg#--install-path=}" ;;
    --install-scene=*) scene="${arg#--install-scene=}" ;;
    --check)
      echo "Verifying archive integrity...  100%   All good."
      exit 0
      ;;
    --version)
      echo "$VERSION"
      exit 0
      ;;
    *) fail "ERR_NO:0x0004;ERR_DES:Unrecognized parameters: $arg. Try './$(basename "$0") --help' for more information." ;;
  esac
done
[[ -n $mode ]] || fail "ERR_NO:0x0004;ERR_DES:no operation given (--full, --install, --upgrade or --uninstall)"
[[ $EUID -eq 0 ]] || fail "ERR_NO:0x0093;ERR_DES:permission denied, install as root"
