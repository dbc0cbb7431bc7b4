################################################################################
#
# local
#
################################################################################

# Build netperfd from the checkout this BR2_EXTERNAL tree lives in (buildroot-package/ is a
# directory of the netperfd repository). The shipped defconfigs name this file in
# BR2_PACKAGE_OVERRIDE_FILE; a release build from git instead removes that line.
# (A package override file names other packages' variables; check-package would want LOCAL_.)
# check-package disable TypoInPackageVariable
NETPERFD_OVERRIDE_SRCDIR = $(BR2_EXTERNAL_NETPERF_PATH)/..
